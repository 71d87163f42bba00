"""Does a benchmark's results file still come out of its documented command? Compare the file recorded under
docs/results/ with one written now (the same command, ``--out`` elsewhere): every number at the same place in both,
the measured-quality figures (scores, counts, hits) apart from the timings and machine readings (seconds, ms, load,
memory, throughput: they move with the host and its load, and are compared as ratios inside one run, never across
runs). The ratios a file records inside one run (speedups, ``*_over_*``, ``vs_*``) are listed beside their recorded
values, not failed: a timing file (no quality figure) counts as written again when it holds every figure recorded.

    python -m benchmarks.compare docs/results/longdoc_scifact.json /tmp/longdoc_scifact.json
    python -m benchmarks.compare docs/results/bench_index.json /tmp/bench_index.json --section quality
    python -m benchmarks.compare --status docs/results/reproduced.json    # which files were written again

Exit status 0 when every quality figure the two share is equal (within ``--tolerance``), or, for a timing file,
when the new file holds every recorded figure; 1 otherwise. Figures only the new file holds are listed, not failed
(a newer run may add arms)."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# a path part naming a timing or a machine reading, never a quality figure (``a_over_b``: one timing over another;
# a quality figure against a reference is ``_vs_``, e.g. recall_at_10_vs_exact)
MACHINE = re.compile(
    r"(^|_)(s|ms|seconds|secs|time|times|wall|cpu|load|rss|mb|gb|qps|throughput|busy|elapsed|faults|hwm|speed|"
    r"speedup|p50|p99|latency|per_s|per_second|stall|ratio|over_first|loads|medians?|minimums?|paired)(_|$)|"
    r"_per_s$|^load_|environment|^command|^started|_over_",
    re.IGNORECASE,
)
# a timing's path part naming a ratio measured inside one run: comparable across runs, as the timings are not
RATIO = re.compile(r"(^|_)(speedup|ratios?|vs)(_|$)|_over_|^over_|_within_|_at_least_", re.IGNORECASE)


def numbers(found: object, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], float]]:
    """Every number (bools too, as 0/1) in a JSON value, with its path of keys and list indexes."""
    if isinstance(found, dict):
        for key, value in found.items():
            yield from numbers(value, (*path, str(key)))
    elif isinstance(found, list):
        for place, value in enumerate(found):
            yield from numbers(value, (*path, f"[{place}]"))
    elif isinstance(found, bool | int | float):
        yield path, float(found)


def is_machine(path: tuple[str, ...], extra: re.Pattern[str] | None = None) -> bool:
    """Whether a number's path names a timing or machine reading (`MACHINE`, or `extra`)."""
    return any(MACHINE.search(part) or (extra is not None and extra.search(part)) for part in path)


@dataclass
class Compared:
    """What two results files share: quality figures equal and differing, timings seen, and figures only one holds."""

    equal: int = 0
    largest: float = 0.0  # the largest absolute difference between two quality figures (NaN pairs aside)
    differing: list[tuple[str, float, float]] = field(default_factory=list)
    machine: int = 0
    ratios: list[tuple[str, float, float]] = field(default_factory=list)  # machine figures that are in-run ratios
    only_recorded: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)

    @property
    def timings_only(self) -> bool:
        """No quality figure shared: a file of timings and machine readings (or of nothing comparable)."""
        return self.equal == 0 and not self.differing

    @property
    def reproduced(self) -> bool:
        """Every shared quality figure equal; a timing file: every recorded figure written again."""
        if self.timings_only:
            return self.machine > 0 and not self.only_recorded
        return not self.differing


def compare(
    recorded: object, new: object, *, tolerance: float = 0.0, ignore: str | None = None, at: tuple[str, ...] = ()
) -> Compared:
    """Compare the numbers of two parsed results files (or of the section found at the keys `at`) place by place
    (`numbers`); quality figures (not `is_machine`) count as equal within `tolerance`, absolute (NaN equals NaN)."""
    extra = re.compile(ignore) if ignore else None
    old, now = dict(numbers(recorded, at)), dict(numbers(new, at))
    out = Compared()
    for path in sorted(old.keys() | now.keys()):
        shown = ".".join(path)
        if path not in now:
            out.only_recorded.append(shown)
            continue
        if path not in old:
            out.only_new.append(shown)
            continue
        if is_machine(path, extra):
            out.machine += 1
            if any(RATIO.search(part) for part in path):
                out.ratios.append((shown, old[path], now[path]))
            continue
        a, b = old[path], now[path]
        if math.isnan(a) or math.isnan(b):
            equal = math.isnan(a) and math.isnan(b)
        else:
            out.largest = max(out.largest, abs(a - b))
            equal = abs(a - b) <= tolerance
        if equal:
            out.equal += 1
        else:
            out.differing.append((shown, a, b))
    return out


def _section(found: object, section: str | None) -> object:
    for key in section.split(".") if section else ():
        if not isinstance(found, dict) or key not in found:
            raise SystemExit(f"--section {section}: no key {key!r} there; name a section both files hold")
        found = found[key]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recorded", type=Path, nargs="?", help="the results file as recorded (docs/results/…)")
    parser.add_argument("new", type=Path, nargs="?", help="the same benchmark's file written now")
    parser.add_argument("--status", type=Path, default=None, metavar="RECORD",
                        help="instead: each results file beside RECORD (e.g. docs/results/reproduced.json) and "
                        "whether its comparisons there hold")  # fmt: skip
    parser.add_argument("--section", default=None, help="compare only this key's value (dots for nesting)")
    parser.add_argument("--tolerance", type=float, default=0.0, help="absolute difference still counted equal")
    parser.add_argument("--ignore", default=None, help="a regular expression of more key names to leave out")
    parser.add_argument("--show", type=int, default=20, help="differing figures listed at most")
    parser.add_argument("--record", type=Path, default=None, help="add this comparison to a JSON file of them (keyed "
                        "by the recorded file and section), e.g. docs/results/reproduced.json")  # fmt: skip
    parser.add_argument("--command", default=None, help="with --record: the command that wrote NEW")
    args = parser.parse_args(argv)
    if args.status is not None:
        print(status(args.status))
        return 0
    if args.recorded is None or args.new is None:
        parser.error("give RECORDED and NEW (or --status RECORD)")
    read = [_section(json.loads(path.read_text(encoding="utf-8")), args.section) for path in (args.recorded, args.new)]
    at = tuple(args.section.split(".")) if args.section else ()
    found = compare(*read, tolerance=args.tolerance, ignore=args.ignore, at=at)
    if args.record is not None:  # before printing: a closed pipe does not lose it
        _record(args, found)
    print(f"{args.recorded} against {args.new}: {found.equal} quality figures equal, {len(found.differing)} differ "
          f"(tolerance {args.tolerance:g}); {found.machine} timings and machine readings not compared; "
          f"{len(found.only_recorded)} only recorded, {len(found.only_new)} only new")  # fmt: skip
    for shown, old, now in found.differing[: args.show]:
        print(f"  differs: {shown}: {old!r} → {now!r}")
    if found.ratios:
        print(f"  {len(found.ratios)} ratios measured inside one run, recorded → now (not failed):")
        for shown, old, now in found.ratios[: args.show]:
            print(f"    {shown}: {old:.4g} → {now:.4g}")
    if found.timings_only:
        print("  a timing file: written again" if found.reproduced else "  a timing file: figures missing now")
    for label, paths in (("only recorded", found.only_recorded), ("only new", found.only_new)):
        if paths:
            print(f"  {label}: " + ", ".join(paths[:8]) + (" …" if len(paths) > 8 else ""))
    return 0 if found.reproduced else 1


def status(record: Path) -> str:
    """Each results file in `record`'s folder and what `record` says of it: written again (every quality figure
    equal, or a timing file whole), differing (how many figures, in which sections), or not compared yet."""
    compared = json.loads(record.read_text(encoding="utf-8")).get("files", {}) if record.is_file() else {}
    by_file: dict[str, list[tuple[str, dict]]] = {}
    for key, entry in compared.items():
        name, _, section = key.partition("#")
        by_file.setdefault(Path(name).name, []).append((section, entry))
    lines, counts = [], {"written again": 0, "differing": 0, "not compared": 0}
    for path in sorted(record.parent.glob("*.json")):
        if path == record:
            continue
        entries = by_file.get(path.name, [])
        if not entries:
            state = "not compared"
        elif all(entry["reproduced"] for _, entry in entries):
            state = "written again"
        else:
            state = "differing"
        counts[state] += 1
        parts = [(section or "whole") + ("" if entry["reproduced"] else f": {entry['differing']} differ")
                 for section, entry in entries]  # fmt: skip
        shown = "" if parts in ([], ["whole"]) else f"  ({'; '.join(parts)})"  # sections only: which
        lines.append(f"{state:14s} {path.name}{shown}")
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    return "\n".join([*lines, summary])


def _record(args: argparse.Namespace, found: Compared) -> None:
    """Add one comparison to the JSON file `args.record` (read again first; the entry for the same recorded file and
    section replaced): its counts, the largest difference, the command, this host and its load."""
    import os
    import time

    from lengthwise.core.results import environment, write_json_atomic

    earlier = json.loads(args.record.read_text(encoding="utf-8")) if args.record.is_file() else {}
    key = str(args.recorded) + (f"#{args.section}" if args.section else "")
    entry = {"command": args.command, "equal": found.equal, "differing": len(found.differing),
             "largest_difference": found.largest, "tolerance": args.tolerance, "reproduced": found.reproduced,
             "first_differing": [list(row) for row in found.differing[:5]], "machine_readings": found.machine,
             "timings_only": found.timings_only, "ratios": len(found.ratios),
             "ratio_pairs": [list(row) for row in found.ratios[:40]],
             "only_recorded": len(found.only_recorded), "only_new": len(found.only_new),
             "date": time.strftime("%Y-%m-%d"), "load": round(os.getloadavg()[0], 2), "host": _host(),
             "environment": environment()}  # fmt: skip
    write_json_atomic(args.record, {**earlier, "files": {**earlier.get("files", {}), key: entry}})


def _host() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor elsewhere."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
