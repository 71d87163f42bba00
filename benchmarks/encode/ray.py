#!/usr/bin/env python
"""Benchmark: `lengthwise encode --runner ray` on a local Ray cluster against the local runner on the same cores.

The first `--docs` SciFact abstracts are encoded with the default long-document setting twice, into fresh
folders: once by the local runner (one process, `--threads` torch threads) and once by Ray (`ray.init(num_cpus=
--threads)`; the pool reserves all CPUs but one for its actors, so on 2 CPUs one actor with 2 threads). Wall
times include Ray's start-up; the throughput ratio is local time / Ray time. Load average before and after. Where
the CPU went: the CPU seconds each process of the machine used during each run (psutil, sampled every 0.5 s),
by command line, so the Ray actor's share can be set against Ray's own processes.

    python -m benchmarks.encode.ray --docs 1000            # → docs/results/bench_ray.json, runs["1000"]
    python -m benchmarks.encode.ray --docs 0               # all 5,183 abstracts → runs["5183"]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from lengthwise.core.results import write_json_atomic

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("LENGTHWISE_DATA", REPO.parent / "shared" / "data"))


class CpuSampler:
    """CPU seconds (user + system) used by every process during a `with` block, by command line (psutil, which
    Ray installs), sampled every 0.5 s so that processes that exit before the end are still counted."""

    def __enter__(self) -> CpuSampler:
        import threading

        self.before, self.stop = self._snapshot(), threading.Event()
        self.last: dict[int, tuple[str, float]] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        self.last.update(self._snapshot())

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            self.last.update(self._snapshot())

    @staticmethod
    def _snapshot() -> dict[int, tuple[str, float]]:
        import psutil

        out = {}
        for proc in psutil.process_iter(["cmdline", "name", "cpu_times"]):
            times = proc.info["cpu_times"]
            if times is not None:
                name = " ".join(proc.info["cmdline"] or []) or proc.info["name"] or "?"
                out[proc.pid] = (name[:70], times.user + times.system)
        return out

    def by_process(self, least: float = 0.3) -> dict[str, float]:
        used = {}
        for pid, (name, seconds) in self.last.items():
            spent = seconds - self.before.get(pid, (name, 0.0))[1]
            if spent >= least:
                used[f"{name} [{pid}]"] = round(spent, 1)
        return dict(sorted(used.items(), key=lambda item: -item[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="the first N SciFact abstracts (0: all 5,183)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "bench_ray.json")
    args = parser.parse_args()
    import ray

    import lengthwise as lw

    source = next(p for p in (DATA / "scifact" / "corpus.jsonl", DATA / "scifact" / "corpus.jsonl.gz") if p.is_file())
    opener = gzip.open if source.suffix == ".gz" else open
    work = Path(tempfile.mkdtemp(prefix="lengthwise-bench-ray-"))
    corpus = work / "corpus.jsonl"
    with opener(source, "rt", encoding="utf-8") as handle:
        lines = list(handle)
    corpus.write_text("".join(lines[: args.docs or None]))
    docs = len(lines[: args.docs or None])
    load_before = os.getloadavg()
    seconds = {}
    cpu = {}
    started = time.perf_counter()
    with CpuSampler() as sampler:
        lw.encode(corpus, work / "local", shard_docs=250, threads=args.threads, format="parquet")
    seconds["local"] = time.perf_counter() - started
    cpu["local"] = sampler.by_process()
    phases = {}
    started = time.perf_counter()
    with CpuSampler() as sampler:
        ray.init(num_cpus=args.threads, include_dashboard=False, log_to_driver=False)
        phases["init"] = time.perf_counter() - started
        lw.encode(corpus, work / "ray", shard_docs=250, runner="ray")
        phases["encode"] = time.perf_counter() - started - phases["init"]
        ray.shutdown()
    seconds["ray"] = time.perf_counter() - started
    phases["shutdown"] = seconds["ray"] - phases["init"] - phases["encode"]
    cpu["ray"] = sampler.by_process()
    manifest = json.loads((work / "local" / "manifest.json").read_text())
    saved = json.loads(args.out.read_text()) if args.out.is_file() else {}
    runs = saved.get("runs", {})
    runs[str(docs)] = {
        "docs": docs, "threads": args.threads, "format": "parquet",
        "long": manifest.get("settings", {}).get("long"),
        "seconds": seconds, "ray_phases": phases, "throughput_ray_vs_local": seconds["local"] / seconds["ray"],
        "cpu_seconds_by_process": cpu,
        "load_before": load_before, "load_after": os.getloadavg(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    write_json_atomic(args.out, {"runs": runs})  # one run per corpus size, kept across runs
    print(seconds, seconds["local"] / seconds["ray"])


if __name__ == "__main__":
    main()
