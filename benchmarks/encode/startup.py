#!/usr/bin/env python3
"""Wall time of `lengthwise --help` and `lengthwise --version`: median of N fresh processes (goal ≤ 0.3 s idle).

Each run starts the installed `lengthwise` script (or ``python -m lengthwise.cli`` when the script is not
beside the interpreter) in a new process, as a user would, and times it to exit. The interpreter's own
start-up (``python -c pass``, site-packages `.pth` files included) is measured the same way, so the share
that lengthwise adds can be read off. Each run also records its CPU time (user + system), which moves far
less than wall time on a busy machine; the load average and the CPU pressure are written down with the
figures. Bytecode caching stays on, as for an installed package.

    python -m benchmarks.encode.startup                   # 21 runs each → docs/results/bench_startup.json
    python -m benchmarks.encode.startup --runs 51 --out /tmp/startup.json
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lengthwise.core.results import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]

GOAL_S = 0.3


def lengthwise_command() -> list[str]:
    """The console script installed beside this interpreter, else ``python -m lengthwise.cli``."""
    script = Path(sys.executable).with_name("lengthwise")
    if script.is_file():
        return [str(script)]
    found = shutil.which("lengthwise")
    return [found] if found else [sys.executable, "-m", "lengthwise.cli"]


# as installed: Python may cache bytecode (__pycache__), even where the caller's environment forbids it
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def time_runs(command: list[str], runs: int) -> dict[str, Any]:
    """Run `command` `runs` times after one untimed warm-up (file cache, bytecode); wall and CPU seconds per run."""
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "wall_median_s": statistics.median(walls),
        "wall_min_s": min(walls),
        "cpu_median_s": statistics.median(cpus),
        "wall_s": [round(w, 4) for w in walls],
    }


def _cpu_pressure() -> float | None:
    """Linux PSI: the share of the last minute in which some runnable task waited for a CPU (percent)."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return float(dict(part.split("=") for part in line.split()[1:])["avg60"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="timed runs per command (default 21)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "bench_startup.json")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    command = lengthwise_command()
    load_before = os.getloadavg()
    arms = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "lengthwise --version": [*command, "--version"],
        "lengthwise --help": [*command, "--help"],
    }
    results: dict[str, dict[str, Any]] = {}
    for name, arm in arms.items():
        results[name] = time_runs(arm, args.runs)
        wall, least, cpu = (results[name][key] for key in ("wall_median_s", "wall_min_s", "cpu_median_s"))
        print(f"{name:<22} wall median {wall:.3f} s (min {least:.3f})  cpu median {cpu:.3f} s")
    load_after = os.getloadavg()
    record = {
        "benchmark": "start-up of the lengthwise command",
        "goal_wall_s": GOAL_S,
        "command": command,
        "runs": args.runs,
        "results": results,
        "goal_met": {
            name: results[name]["wall_median_s"] <= GOAL_S for name in ("lengthwise --version", "lengthwise --help")
        },
        "load_average_1m": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
        "cpu_pressure_some_avg60": _cpu_pressure(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    print(f"load average (1 min) {load_before[0]:.2f} → {load_after[0]:.2f} on {os.cpu_count()} CPUs")
    write_json_atomic(args.out, record)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
