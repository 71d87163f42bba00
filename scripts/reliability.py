#!/usr/bin/env python3
"""Re-run every bad input and fault in docs/reliability.md and fail if any ends badly.

Each case runs the real `lengthwise` command in a fresh temporary folder and is judged by its outcome:
a hang (past its timeout), a Python traceback, an unexpected exit code, a missing expected message, or a
failed check of what it left on disk (a silent wrong result, lost data). Cases live in
`scripts/reliability_cases/*.py`, each module exposing ``CASES: list[Case]``.

    python scripts/reliability.py                # run all, print the table, exit 1 on any bad outcome
    python scripts/reliability.py --write-docs   # also rewrite the table in docs/reliability.md
    python scripts/reliability.py -k bake        # only cases whose name contains "bake"
    python scripts/reliability.py -k bake --write-docs   # … and replace only their rows in the table
    python scripts/reliability.py --render out.json --write-docs   # the table from a pytest run (see below)

The same cases run under pytest: ``LENGTHWISE_RELIABILITY_OUT=out.json pytest -m reliability``
(`tests/test_reliability.py`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reliability_cases import Case, Context, Outcome

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- reliability table: begin -->", "<!-- reliability table: end -->"


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted((ROOT / "scripts" / "reliability_cases").glob("[!_]*.py")):
        spec = importlib.util.spec_from_file_location(f"reliability_cases.{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases.extend(module.CASES)
    return cases


def run_case(case: Case, context: Context) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="lw-rel-") as folder:
        tmp = Path(folder)
        if case.setup is not None:
            case.setup(tmp, context)
        argv = [part.format(tmp=tmp, tiny=context.tiny_model, minilm=context.minilm) for part in case.argv]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "200", **case.env}
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "lengthwise.cli", *argv],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=case.timeout,
                input="",
            )
        except subprocess.TimeoutExpired:
            return Outcome(case, None, "hang", f"no exit after {case.timeout:.0f} s", case.timeout)
        seconds = time.perf_counter() - started
        output = proc.stdout + proc.stderr
        first = _said(output, case.expect).replace(str(tmp), "{tmp}")
        if "Traceback (most recent call last)" in output:
            return Outcome(case, proc.returncode, "traceback", output.strip().splitlines()[-1][:160], seconds)
        if case.expect_exit != proc.returncode:
            return Outcome(case, proc.returncode, "wrong exit", first, seconds)
        if case.expect is not None and case.expect not in output:
            return Outcome(case, proc.returncode, "wrong message", first, seconds)
        if case.check is not None and (reason := case.check(tmp, output)):
            return Outcome(case, proc.returncode, "bad result", reason, seconds)
        return Outcome(case, proc.returncode, "ok", first, seconds)


def _said(output: str, expect: str | None) -> str:
    """The line of `output` that shows what the command said: its error line, else the line holding the expected
    text, else its last line; rich's table borders and rows are skipped, they say nothing in one cell."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and line.strip()[0] not in _BOX]
    error = next((line for line in lines if line.startswith("error:")), None)
    expected = next((line for line in lines if expect and expect in line), None)
    return error or expected or (lines[-1][-160:] if lines else "")


_BOX = "".join(chr(code) for code in range(0x2500, 0x2580))  # box-drawing characters: rich's table lines


def outcome_row(o: Outcome) -> dict:
    """One outcome as the table (and a pytest run's JSON) records it."""
    return {"name": o.case.name, "item": o.case.item, "argv": o.case.argv, "exit": o.exit, "verdict": o.verdict,
            "message": o.message, "seconds": round(o.seconds, 1)}  # fmt: skip


def markdown(outcomes: list[dict]) -> str:
    rows = ["| case | issue item | command | exit | outcome | what it said |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        said = o["message"].replace("|", "\\|").replace("\n", " ")
        command = "lengthwise " + shlex.join(o["argv"]).replace("|", "\\|")
        rows.append(f"| {o['name']} | {o['item']} | `{command}` | {o['exit']} | {o['verdict']} | {said} |")
    return "\n".join(rows)


def _merged(old: str, new: str, order: list[str]) -> str:
    """The table `old` with the rows of `new` in place of the same cases', in the cases' order."""
    rows = {}
    for table in (old, new):
        for line in table.strip().splitlines()[2:]:
            rows[line.split("|")[1].strip()] = line
    head = new.strip().splitlines()[:2]
    return "\n".join(head + [rows[name] for name in order if name in rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", default="", help="run only cases whose name contains this")
    parser.add_argument("--write-docs", action="store_true", help="rewrite the table in docs/reliability.md")
    parser.add_argument("--render", type=Path, help="take the outcomes from a pytest run's JSON, run nothing")
    args = parser.parse_args()
    if args.render is not None:
        outcomes = [o for o in json.loads(args.render.read_text(encoding="utf-8")) if args.k in o["name"]]
    else:
        context = Context.build()
        outcomes = []
        for case in [case for case in load_cases() if args.k in case.name]:
            outcome = run_case(case, context)
            outcomes.append(outcome_row(outcome))
            print(f"{outcome.verdict:>13}  {case.name}  ({outcome.seconds:.1f} s)  {outcome.message}", flush=True)
    table = markdown(outcomes)
    if args.write_docs:
        text = DOC.read_text(encoding="utf-8")
        start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
        if args.k:  # a partial run: its rows replace those cases' rows, every other row is kept as it was
            table = _merged(text[start:stop], table, [case.name for case in load_cases()])
        DOC.write_text(text[:start] + "\n" + table + "\n" + text[stop:], encoding="utf-8")
    bad = [o for o in outcomes if o["verdict"] != "ok"]
    print(f"{len(outcomes) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
