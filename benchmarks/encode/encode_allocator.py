"""Whole-process `lengthwise encode` with glibc's allocator tuned (the command's default) and left alone.

The command tunes glibc at start (`lengthwise.core.allocator`: freed activation memory stays in the process instead
of being handed back between batches and faulted in again); `LENGTHWISE_MALLOC_TUNING=0` turns it off. This runs
the same encode both ways, alternating, each a fresh `lengthwise encode` process into a fresh folder: the real
all-MiniLM-L6-v2, one torch thread (`--threads 1`, OMP_NUM_THREADS=1), the default multi-vector windows, documents of
consecutive wiki1m sentences (bench_longdoc_throughput's). Per run, from the process's own rusage (os.wait4): wall
seconds, CPU seconds (user + system), peak RSS and minor page faults. The load average is recorded before and after.

    python -m benchmarks.encode.encode_allocator --docs 40 --doc-tokens 1500 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from benchmarks._measure import run_measured
from benchmarks.encode.longdoc_throughput import _documents
from lengthwise.core.allocator import OPT_OUT
from lengthwise.core.results import environment, write_json_atomic

ARMS = {"tuned": {}, "glibc_default": {OPT_OUT: "0"}}
CLEARED = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", OPT_OUT)


def _run(corpus: Path, out: Path, extra: dict[str, str]) -> dict[str, float]:
    """One `lengthwise encode` process: wall and CPU seconds, its peak RSS (MiB) and minor faults (`run_measured`)."""
    env = {name: value for name, value in os.environ.items() if name not in CLEARED}
    env.update(extra, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    command = [shutil.which("lengthwise") or "lengthwise", "encode", "--data", str(corpus), "--out", str(out)]
    run = run_measured([*command, "--threads", "1"], env=env, stdout=subprocess.DEVNULL)
    if run["returncode"] != 0:
        raise SystemExit(f"lengthwise encode failed ({run['returncode']})")
    return {
        "wall_s": run["wall_s"],
        "cpu_s": run["cpu_s"],
        "peak_rss_mb": run["peak_rss_bytes"] / 2**20,  # its own peak (VmHWM), not its parent's at the fork
        "minor_faults": run["minor_faults"],
    }


def _summary(runs: list[dict[str, float]]) -> dict[str, float]:
    return {f"{key}_median": statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--doc-tokens", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("docs/results/bench_encode_allocator.json"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lw-alloc-"))
    corpus = work / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as handle:
        for i, text in enumerate(_documents(args.docs, args.doc_tokens)):
            handle.write(json.dumps({"_id": f"d{i}", "text": text}) + "\n")
    load_before = os.getloadavg()
    _run(corpus, work / "warm", {})  # untimed: page cache, bytecode
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    for repeat in range(args.repeats):
        order = list(ARMS) if repeat % 2 == 0 else list(reversed(ARMS))
        for arm in order:
            runs[arm].append(_run(corpus, work / f"{arm}-{repeat}", ARMS[arm]))
            print(arm, {k: round(v, 2) for k, v in runs[arm][-1].items()}, flush=True)
    load_after = os.getloadavg()
    shard_files = sum(1 for _ in (work / "warm").glob("*.npy"))  # a check that the encode wrote its output
    shutil.rmtree(work)
    summary = {arm: _summary(rows) for arm, rows in runs.items()}
    tuned, default = summary["tuned"], summary["glibc_default"]
    result = {
        "benchmark": "bench_encode_allocator",
        "settings": {**vars(args), "out": str(args.out), "threads": 1, "arms": ARMS, "shard_files": shard_files},
        "load_average": {"before": list(load_before), "after": list(load_after)},
        "machine_shared": True,
        "runs": runs,
        "summary": summary,
        "speedup_wall": default["wall_s_median"] / tuned["wall_s_median"],
        "speedup_cpu": default["cpu_s_median"] / tuned["cpu_s_median"],
        "peak_rss_ratio": tuned["peak_rss_mb_median"] / default["peak_rss_mb_median"],
        "peak_rss_extra_mb": tuned["peak_rss_mb_median"] - default["peak_rss_mb_median"],
        "faults_ratio": tuned["minor_faults_median"] / default["minor_faults_median"],
        "environment": environment(),
    }
    write_json_atomic(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("runs", "environment")}, indent=1))


if __name__ == "__main__":
    main()
