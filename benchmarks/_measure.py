"""The measures the benchmarks share: wall time of a call, the p50 and p99 of repeated calls, the process's peak
resident memory (or a command's, run to its end), bytes on disk, recall of a top k against the exact one, nDCG@10
through trec_eval, and the command line a results file was made by. Each is the one formula (and rounding) the
benchmarks used before they shared it; a benchmark imports it as ``from benchmarks._measure import …``."""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def command_line(module: str, argv: list[str] | None = None) -> str:
    """How this run was started, to be recorded beside its figures: ``python -m MODULE`` and its arguments
    (`argv`; None: this process's), quoted as a shell would need them."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of `run()` (perf_counter) and what it returned."""
    start = time.perf_counter()
    value = run()
    return time.perf_counter() - start, value


def _spent_ms(call: Callable[[int], Any], times: int) -> list[float]:
    """The milliseconds (perf_counter) of `call(n)` for n = 0 … times-1, every call timed, in call order."""
    spent = []
    for n in range(times):
        start = time.perf_counter()
        call(n)
        spent.append(1000 * (time.perf_counter() - start))
    return spent


def p50_ms(call: Callable[[int], Any], times: int) -> float:
    """The median milliseconds of `call(n)` for n = 0 … times-1, every call timed."""
    return statistics.median(_spent_ms(call, times))


def p99_ms(call: Callable[[int], Any], times: int) -> float:
    """The 99th percentile of the milliseconds of `call(n)` for n = 0 … times-1, every call timed as `p50_ms` times
    them: ``numpy.percentile(spent, 99)``, numpy's default linear interpolation between the two closest ranks (the
    formula of the p99 figures the search benchmarks record). Below 100 calls it lies between the two slowest."""
    return float(np.percentile(_spent_ms(call, times), 99))


def peak_rss_bytes() -> int:
    """This process's peak resident set size in bytes, the most it has held since it started (not what it holds
    now): ``resource.getrusage(resource.RUSAGE_SELF).ru_maxrss × 1024``, right on Linux, where ``ru_maxrss`` is in
    kilobytes (macOS reports bytes, so the figure would be 1024 times too large there; Windows has no `resource`),
    or ``VmHWM`` of ``/proc/self/status`` where that is larger: some kernels (6.18 here) update ``ru_maxrss`` lazily,
    a few hundred kilobytes behind what the process holds. Linux keeps ``ru_maxrss`` through fork and exec: a child
    process starts at its parent's resident size at the fork."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return max(peak, next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")))
    except (OSError, StopIteration):
        return peak


def run_measured(command: list[str], **popen: Any) -> dict[str, float]:
    """Run `command` to its end: its exit code, wall and CPU seconds, minor page faults, and its own peak resident
    bytes, ``VmHWM`` of ``/proc/PID/status`` read every 20 ms while it runs (the high-water mark of its address space,
    which exec starts afresh) — not ``ru_maxrss`` from `os.wait4`, which starts a child at its parent's resident
    size at the fork (a child touching 60 MB under a parent of 400 MB read 414 MB). On a system without ``/proc`` the
    peak is that ``ru_maxrss``."""
    start = time.perf_counter()
    process = subprocess.Popen(command, **popen)
    status_file, peak = f"/proc/{process.pid}/status", 0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        try:
            with open(status_file, encoding="ascii") as lines:
                peak = max(peak, next(int(line.split()[1]) * 1024 for line in lines if line.startswith("VmHWM:")))
        except (OSError, StopIteration):
            pass
        time.sleep(0.02)
    process.returncode = os.waitstatus_to_exitcode(status)
    return {"returncode": process.returncode, "wall_s": time.perf_counter() - start,
            "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_bytes": peak or usage.ru_maxrss * 1024,
            "minor_faults": float(usage.ru_minflt)}  # fmt: skip


def disk_bytes(path: Path) -> int:
    """Bytes on disk of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(part.stat().st_size for part in path.rglob("*") if part.is_file())


def recall(found: list[list[str]], exact: list[list[str]]) -> float:
    """Mean over queries of the share of the exact top ids that `found` holds (each query's found and exact ids)."""
    return float(np.mean([len(set(f) & set(e)) / max(1, len(e)) for f, e in zip(found, exact, strict=True)]))


def ndcg_at_10(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> float:
    """nDCG@10 (× 100) of a run, the mean over the queries trec_eval scores (lengthwise's RetrievalConfig)."""
    from lengthwise.evaluation.config import RetrievalConfig
    from lengthwise.evaluation.retrieval import trec_scores

    per_query = trec_scores(qrels, run, RetrievalConfig())
    return 100 * statistics.mean(scores["ndcg@10"] for scores in per_query.values())
