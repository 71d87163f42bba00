"""The Milvus backend against a Milvus server, dense side (issue 50: the path a cluster takes, `engine_kind` ``server``:
HNSW, searches a server runs side by side). It needs a running server, for instance the embedded Milvus standalone
that PyPI's ``milvus`` package starts (Milvus 2.3.5, the whole standalone binary with its own etcd; no Docker):

    python -m venv --system-site-packages /tmp/msrv && /tmp/msrv/bin/pip install --no-deps milvus==2.3.5
    /tmp/msrv/bin/python -c "from milvus import default_server as s; s.set_base_dir('/tmp/msrv/data'); s.start(); \\
        import time; time.sleep(10**9)" &
    python -m benchmarks.search.milvus_server --index /work/h49scale/scale-1000000/index --name scale1m

Milvus 2.3 has no sparse vectors, so only the dense side is loaded (the index opened with its lexical side left
out: the windows collection then has no BM25 field) and only dense queries are timed; hybrid on a server needs
Milvus 2.4 or later, not at hand here. The index's windows are loaded (`load_into_milvus`, resumed if stopped);
once the server has built its index over every row, `--queries` seeded query vectors (a window of a random
document with small noise) are searched one at a time on one thread through the server and the local index:
recall@10 against the exact scan, the same top 10 as the local index (ids and scores), the p50 of each, the
engine's smallest search alone, and two of them sent at once against one after the other. Written to the section
``server-<name>`` of docs/results/bench_milvus.json, with the server's version and the load average before and
after each step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import command_line

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "bench_milvus.json"


class _DenseSide:
    """The local index as the load sees it with its lexical side left out (Milvus 2.3 has no sparse vectors)."""

    lexical = None

    def __init__(self, index: Any) -> None:
        self.index = index

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


def _queries(local: Any, count: int) -> np.ndarray:
    """`count` seeded unit query vectors: a window of a random document, with Gaussian noise (σ 0.02)."""
    rng = np.random.default_rng(0)
    rows = rng.integers(0, int(local.offsets[-1]), count)
    vectors = np.asarray(local.vectors[np.sort(rows)], dtype=np.float32)
    vectors = vectors + rng.normal(0, 0.02, vectors.shape).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _p50_ms(call: Any, count: int) -> tuple[float, list[Any]]:
    """The p50 of `call(n)` over n = 1 … count-1 (n = 0 first, untimed), and every answer."""
    found = [call(0)]
    spent = []
    for n in range(1, count):
        start = time.perf_counter()
        found.append(call(n))
        spent.append(1000 * (time.perf_counter() - start))
    return statistics.median(spent), found


def step_queries(local: Any, engine: Any, count: int) -> dict[str, Any]:
    from benchmarks._measure import recall
    from benchmarks.search.milvus_scale import _engine_floor, _two_at_once

    vectors = _queries(local, count)
    exact = [[d for d, _ in row] for row in local.exact_vectors(vectors, 10, scoring=local.scoring)]
    local_p50, near = _p50_ms(lambda n: local.search_vectors(vectors[n : n + 1], k=10)[0], count)
    server_p50, found = _p50_ms(lambda n: engine.search_vectors(vectors[n : n + 1], k=10)[0], count)
    floor, pairs = _engine_floor(engine, vectors), _two_at_once(engine, vectors)
    ids = {"server": [[d for d, _ in row] for row in found], "local": [[d for d, _ in row] for row in near]}
    same = [a == b for a, b in zip(ids["server"], ids["local"], strict=True)]
    gaps = [abs(s - t) for a, b, one in zip(found, near, same, strict=True) if one
            for (_, s), (_, t) in zip(a, b, strict=True)]  # fmt: skip
    return {
        "queries": count, "server_recall_at_10_vs_exact": recall(ids["server"], exact),
        "local_recall_at_10_vs_exact": recall(ids["local"], exact),
        "same_top10_ids_as_local": float(np.mean(same)), "largest_score_gap_same_ids": max(gaps, default=None),
        "server_p50_ms": server_p50, "local_p50_ms": local_p50, "server_over_local_p50": server_p50 / local_p50,
        "engine_floor_p50_ms": floor["p50_ms"], "engine_floor_over_local_p50": floor["p50_ms"] / local_p50,
        "two_at_once_p50_ms": pairs["two_at_once_p50_ms"],
        "one_after_the_other_p50_ms": pairs["one_after_the_other_p50_ms"],
    }  # fmt: skip


def _wait_for_index(client: Any, collection: str) -> float:
    """Seconds until the server has built the dense index over every row and has none pending (it builds after the
    load returns, and again over the segments its compaction merges; a search meanwhile scans the rows not yet
    indexed, and the builds take the machine's cores): the queries are timed on the built index, the server idle."""
    start = time.perf_counter()
    while True:
        state = client.describe_index(collection, "dense")
        keys = ("indexed_rows", "total_rows", "pending_index_rows")
        indexed, total, pending = (int(state.get(key, 0)) for key in keys)
        if indexed >= total > 0 and not pending:
            return time.perf_counter() - start
        print(f"  index: {indexed} of {total} rows, {pending} pending", flush=True)
        time.sleep(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True, help="a local index (its dense side is loaded)")
    parser.add_argument("--name", required=True, help="the name it is served under (and the section's)")
    parser.add_argument("--uri", default="http://localhost:19530")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from importlib.metadata import version

    import lengthwise as lw
    from lengthwise.core.results import write_json_atomic
    from lengthwise.facade import MilvusIndex
    from lengthwise.search.milvus.load import load_into_milvus

    local = lw.LongIndex.open(args.index)
    section: dict[str, Any] = {
        "index": str(args.index), "windows": int(local.offsets[-1]), "documents": len(local.doc_ids),
        "uri": args.uri, "command": command_line("benchmarks.search.milvus_server"),
        "versions": {p: version(p) for p in ("pymilvus", "usearch")},
        "what": "dense side only; one query at a time on one search thread; the server on this machine",
    }  # fmt: skip
    before, start = os.getloadavg(), time.perf_counter()
    engine = load_into_milvus(_DenseSide(local), args.uri, args.name)
    section["load"] = {"load_s": time.perf_counter() - start, "loadavg_before": before,
                       "loadavg_after": os.getloadavg(), "returned_at": time.strftime("%H:%M:%S")}  # fmt: skip
    print("load", json.dumps(section["load"]), flush=True)
    section["load"]["index_wait_s"] = _wait_for_index(engine.client, engine.collection)
    section["load"]["loadavg_after_index"] = os.getloadavg()
    section["load"]["index_built_by"] = time.strftime("%H:%M:%S")
    earlier = (json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}).get(f"server-{args.name}", {})
    # each run's load is kept (one that resumed a finished load took seconds), and each run's queries
    section["load_runs"] = [*earlier.get("load_runs", [earlier["load"]] if "load" in earlier else []), section["load"]]
    section["dense_runs"] = earlier.get("dense_runs", [earlier["dense"]] if "dense" in earlier else [])
    print("index built", json.dumps(section["load"]), flush=True)
    section["server_version"] = engine.client.get_server_version()
    start = time.perf_counter()
    engine = MilvusIndex.open(args.uri, args.name)
    section["open_s"] = time.perf_counter() - start
    before = os.getloadavg()
    section["dense"] = {**step_queries(local, engine, args.queries), "loadavg_before": before,
                        "loadavg_after": os.getloadavg(), "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    section["dense_runs"].append(section["dense"])
    print("dense", json.dumps(section["dense"]), flush=True)
    made = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    made[f"server-{args.name}"] = section
    write_json_atomic(RESULTS, made)


if __name__ == "__main__":
    main()
