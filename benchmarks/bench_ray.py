#!/usr/bin/env python
"""Benchmark: `lengthwise encode --engine ray` on a local Ray cluster against the local engine on the same cores.

The first `--docs` SciFact abstracts are encoded with the default long-document setting twice, into fresh
folders: once by the local engine (one process, `--threads` torch threads) and once by Ray (`ray.init(num_cpus=
--threads)`; the pool reserves all CPUs but one for its actors, so on 2 CPUs one actor with 2 threads). Wall
times include Ray's start-up; the throughput ratio is local time / Ray time. Load average before and after.

    python benchmarks/bench_ray.py --docs 1000            # → docs/results/bench_ray.json
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

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LENGTHWISE_DATA", REPO.parent / "shared" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
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
        corpus.write_text("".join(line for _, line in zip(range(args.docs), handle, strict=False)))
    load_before = os.getloadavg()
    seconds = {}
    started = time.perf_counter()
    lw.encode(corpus, work / "local", shard_docs=250, threads=args.threads, format="parquet")
    seconds["local"] = time.perf_counter() - started
    started = time.perf_counter()
    ray.init(num_cpus=args.threads, include_dashboard=False, log_to_driver=False)
    lw.encode(corpus, work / "ray", shard_docs=250, engine="ray")
    seconds["ray"] = time.perf_counter() - started
    ray.shutdown()
    manifest = json.loads((work / "local" / "manifest.json").read_text())
    write_json_atomic(args.out, {
        "docs": args.docs, "threads": args.threads, "format": "parquet",
        "long": manifest.get("settings", {}).get("long"),
        "seconds": seconds, "throughput_ray_vs_local": seconds["local"] / seconds["ray"],
        "load_before": load_before, "load_after": os.getloadavg(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    })  # fmt: skip
    print(seconds, seconds["local"] / seconds["ray"])


if __name__ == "__main__":
    main()
