#!/usr/bin/env python3
"""Write the README's test-suite figures (test count, skips, duration, load) from a pytest JUnit XML report.

The figures are never typed by hand: run the suite with ``--junitxml``, then this script rewrites the block
between ``<!-- suite-figures:start -->`` and ``<!-- suite-figures:end -->`` in README.md.

    HF_HUB_OFFLINE=1 pytest --junitxml=/tmp/suite.xml && python scripts/suite_figures.py /tmp/suite.xml \\
        --how "bash scripts/test.sh in a fresh clone, shared data present" --load "0.4 before, 2.1 during"
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- suite-figures:start -->", "<!-- suite-figures:end -->"


def figures(report: Path) -> dict[str, float]:
    """Tests, failures, errors, skips and seconds summed over the report's test suites."""
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    keys = ("tests", "failures", "errors", "skipped", "time")
    return {key: sum(float(suite.get(key, 0)) for suite in suites) for key in keys}


def block(counts: dict[str, float], how: str, load: str, day: str) -> str:
    """The README text for one measured run."""
    minutes, seconds = divmod(round(counts["time"]), 60)
    ran = int(counts["tests"] - counts["skipped"])
    failed = int(counts["failures"] + counts["errors"])
    return (
        f"{START}\n**Suite duration** (written by `scripts/suite_figures.py` from the run's JUnit report): on {day}, "
        f"{how}: {int(counts['tests'])} tests collected, {ran} run, {int(counts['skipped'])} skipped, {failed} failed, "
        f"in {minutes} min {seconds:02d} s of test time on the 2-core machine (load average {load}).\n{END}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="pytest --junitxml output")
    parser.add_argument("--how", required=True, help="how the suite was run, in words")
    parser.add_argument("--load", required=True, help="the load average beside the run")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"error: {args.report}: no such report; run pytest with --junitxml={args.report}", file=sys.stderr)
        return 2
    text = args.readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"error: {args.readme} has no {START} … {END} block to rewrite", file=sys.stderr)
        return 2
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    new = block(figures(args.report), args.how, args.load, dt.date.today().isoformat())
    args.readme.write_text(head + new + tail, encoding="utf-8")
    print(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
