"""Milvus Lite 2.5.1, the last release with Milvus's C++ core, measured on the calls the Milvus backend makes (issue
50): would it serve the embedded index faster than Milvus Lite 3.x, a Python engine? Session 51 answered yes and moved
the backend onto it (docs/engines.md, "Session 51"); this times the calls themselves, without lengthwise, on `--rows`
real window vectors of the 1M scale index (all-MiniLM-L6-v2 windows with noise), 20 windows a document, each with an
8-term sparse vector:

- insert, `--batch` rows a call (the load's upserts), and first a sweep of batch sizes on `--sweep-rows` rows each
  (an insert's cost a row grows with its batch: session 51 found 0.06 ms a row at 500 and 2.6 ms at 5,000);
- the nearest windows of one query (IVF_FLAT, nlist 1024: what Milvus Lite 2.5.1 allows), limit 10 and 1,000,
  and the 10 nearest's recall against an exact scan (numpy) of the same rows;
- a sparse inner-product search of limit 16,384 (a BM25 side; the rows that hold one of 4 random terms of 5,000);
- reading windows back by primary key with their vectors (`id in [...]`; the rescoring), in one query and in
  queries of 200.

It needs its own environment (milvus-lite 2.5.1 beside the same pymilvus; numpy):

    python -m venv /tmp/ml25 && /tmp/ml25/bin/pip install pymilvus==3.0.2 milvus-lite==2.5.1 numpy
    /tmp/ml25/bin/python -m benchmarks.search.milvus_lite25 --vectors /work/h50scale/index/generation-*/vectors.npy

It writes docs/results/bench_milvus_lite25.json (with the load average before and after). The database goes to
--out and is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import p50_ms

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "bench_milvus_lite25.json"
PER_DOC = 20


def _collection(client: Any, dim: int) -> None:
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("doc", DataType.INT64)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("bm25", DataType.SPARSE_FLOAT_VECTOR)
    index = client.prepare_index_params()
    index.add_index("dense", index_type="IVF_FLAT", metric_type="IP", params={"nlist": 1024})
    index.add_index("bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    client.create_collection("windows", schema=schema, index_params=index)


def _insert(client: Any, vectors: Any, first: int, last: int, rng: Any) -> None:
    part = np.asarray(vectors[first:last], dtype=np.float32).tolist()
    client.insert("windows", [{"id": first + i, "doc": (first + i) // PER_DOC, "dense": row,
                               "bm25": {int(t): 1.0 for t in rng.integers(0, 5_000, 8)}}
                              for i, row in enumerate(part)])  # fmt: skip


def _scan(vectors: Any, query: Any, step: int = 100_000) -> Any:
    return np.concatenate([np.asarray(vectors[at : at + step], dtype=np.float32) @ query
                           for at in range(0, len(vectors), step)])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=Path, required=True, help="a (windows, dim) float32 .npy (memory-mapped)")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--sweep", default="500,1000,2000,5000", help="batch sizes to time, comma-separated")
    parser.add_argument("--sweep-rows", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=None, help="the database folder (default: a temporary one)")
    args = parser.parse_args()
    from pymilvus import MilvusClient

    vectors = np.load(args.vectors, mmap_mode="r")
    if len(vectors) < args.rows:
        raise SystemExit(f"error: {args.vectors} holds {len(vectors)} vectors; ask for --rows {len(vectors)} or fewer")
    folder = args.out or Path(tempfile.mkdtemp(prefix="bench-milvus-lite25-"))
    folder.mkdir(parents=True, exist_ok=True)
    before, rng = os.getloadavg(), np.random.default_rng(0)
    client = MilvusClient(str(folder / "milvus.db"))
    sweep = {}
    for size in [int(b) for b in args.sweep.split(",") if b]:
        _collection(client, vectors.shape[1])
        start = time.perf_counter()
        for first in range(0, args.sweep_rows, size):
            _insert(client, vectors, first, min(args.sweep_rows, first + size), rng)
        sweep[str(size)] = 1000 * (time.perf_counter() - start) / args.sweep_rows
        print(f"  insert in batches of {size}: {sweep[str(size)]:.3f} ms a row", flush=True)
        client.drop_collection("windows")
    _collection(client, vectors.shape[1])
    start = time.perf_counter()
    for first in range(0, args.rows, args.batch):
        last = min(args.rows, first + args.batch)
        _insert(client, vectors, first, last, rng)
        if last % 50_000 == 0 or last == args.rows:
            print(f"  {last:,} rows, {time.perf_counter() - start:.0f} s", flush=True)
    insert_s = time.perf_counter() - start
    client.flush("windows")
    start = time.perf_counter()
    client.load_collection("windows")
    load_s = time.perf_counter() - start
    queries = np.asarray(vectors[rng.integers(0, args.rows, 20)], dtype=np.float32)

    def nearest(limit: int) -> Any:
        return lambda n: client.search("windows", [queries[n].tolist()], anns_field="dense", limit=limit,
                                       search_params={"metric_type": "IP", "params": {"nprobe": 32}},
                                       output_fields=["id"])  # fmt: skip

    exact = [set(np.argsort(-_scan(vectors[: args.rows], q))[:10].tolist()) for q in queries]
    hits = [{int(h["id"]) for h in nearest(10)(n)[0]} for n in range(len(queries))]
    recall = statistics.mean(len(e & h) / 10 for e, h in zip(exact, hits, strict=True))
    returned: list[int] = []

    def sparse(n: int) -> Any:
        terms = {int(t): 1.0 for t in np.random.default_rng(n).integers(0, 5_000, 4)}
        found = client.search("windows", [terms], anns_field="bm25", limit=16_384,
                              search_params={"metric_type": "IP"}, output_fields=["id"])[0]  # fmt: skip
        returned.append(len(found))

    rows = (np.arange(2_000) * 7 % args.rows).tolist()

    def read(size: int) -> Any:
        return lambda n: [client.query("windows", filter=f"id in {rows[at : at + size]}", output_fields=["id", "dense"],
                                       limit=size) for at in range(0, len(rows), size)]  # fmt: skip

    result = {
        "rows": args.rows, "dim": int(vectors.shape[1]), "batch": args.batch, "vectors": str(args.vectors),
        "versions": {p: version(p) for p in ("pymilvus", "milvus-lite")},
        "insert_s": insert_s, "insert_ms_per_row": 1000 * insert_s / args.rows, "load_s": load_s,
        "insert_ms_per_row_by_batch": sweep, "sweep_rows": args.sweep_rows, "nearest_10_recall_vs_exact": recall,
        "nearest_10_p50_ms": p50_ms(nearest(10), 20), "nearest_1000_p50_ms": p50_ms(nearest(1_000), 20),
        "sparse_16384_p50_ms": p50_ms(sparse, 10), "sparse_rows_returned_p50": statistics.median(returned),
        "read_2000_by_id_one_query_p50_ms": p50_ms(read(2_000), 3),
        "read_2000_by_id_queries_of_200_p50_ms": p50_ms(read(200), 3),
        "loadavg_before": before, "loadavg_after": os.getloadavg(), "date": time.strftime("%Y-%m-%d"),
        "machine": "2 CPU cores (the load average beside the figures)",
    }  # fmt: skip
    client.close()
    shutil.rmtree(folder, ignore_errors=True)
    write_section(RESULTS, f"rows-{args.rows}", result)


def write_section(results: Path, key: str, result: dict[str, Any]) -> None:
    """Write `result` as the section `key` of the JSON file `results`, the other sections kept, atomically (a file
    staged beside it, then moved: these benchmarks run without lengthwise installed), and print it."""
    made = json.loads(results.read_text()) if results.is_file() else {}
    made[key] = result
    staged = results.with_suffix(".json.tmp")
    staged.write_text(json.dumps(made, indent=2) + "\n", encoding="utf-8")
    staged.replace(results)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
