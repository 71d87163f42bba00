"""Where a Milvus dense query's time goes, and its window read path before and after (issue 50): the windows of 100
documents read back from the engine for the exact rescoring, by the path as it was (rows with ``id``, ``doc`` and
``dense`` as Python lists, sorted as dicts, then one array) and by `MilvusIndex._windows` now (``strict_float32``:
each row's vector a view of one float32 array; the document from the row number), alternating in one run on the same
documents (three draws of 100, seeded), with the load average before and after; the two give the same arrays.

    python benchmarks/bench_milvus_sets.py --sets scifact passkey   # the loads this reads (under --out)
    python benchmarks/bench_milvus_read.py --sets scifact passkey

Written to docs/results/bench_milvus.json, section ``read_path``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "bench_milvus.json"


def _before(engine: Any, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`MilvusIndex._windows` as it was before the read path changed (documents of at most SEARCH_LIMIT windows)."""
    from lengthwise.longdoc.search._backend_milvus import SEARCH_LIMIT

    found: list[dict[str, Any]] = []
    group: list[int] = []
    held = 0
    counts = (engine.offsets[docs + 1] - engine.offsets[docs]).tolist()
    for doc, count in [*zip(docs.tolist(), counts, strict=True), (-1, SEARCH_LIMIT)]:
        if group and held + count > SEARCH_LIMIT - (doc < 0):
            found += engine.client.query(engine.collection, filter=f"doc in {group}",
                                         output_fields=["id", "doc", "dense"], limit=held)  # fmt: skip
            group, held = [], 0
        group.append(doc)
        held += count
    rows = sorted(found, key=lambda r: r["id"])
    vectors = np.asarray([r["dense"] for r in rows], dtype=np.float32).reshape(len(rows), -1)
    ids, owners = (np.asarray([r[key] for r in rows], dtype=np.int64) for key in ("id", "doc"))
    return ids, owners, vectors


def run_set(name: str, out: Path, draws: int) -> dict[str, Any]:
    from lengthwise.longdoc.search._backend_milvus import MilvusIndex

    engine = MilvusIndex.open(str(out / name / "milvus.db"), name)
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {"before": [], "after": []}
    windows = []
    before = os.getloadavg()
    for _ in range(draws):
        docs = np.sort(rng.choice(len(engine.doc_ids), size=min(100, len(engine.doc_ids)), replace=False))
        made = []
        for label, read in (("before", lambda d: _before(engine, d)), ("after", engine._windows)):
            start = time.perf_counter()
            made.append(read(docs))
            times[label].append(time.perf_counter() - start)
        assert all(np.array_equal(a, b) for a, b in zip(*made, strict=True)), "the two paths differ"
        windows.append(len(made[0][0]))
    engine.client.close()
    return {"windows_per_read": windows, "before_s": times["before"], "after_s": times["after"],
            "before_median_s": statistics.median(times["before"]), "after_median_s": statistics.median(times["after"]),
            "loadavg_before": before, "loadavg_after": os.getloadavg()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=["scifact", "passkey"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_milvus_sets"), help="bench_milvus_sets's")
    parser.add_argument("--draws", type=int, default=3)
    args = parser.parse_args()
    from lengthwise.core.results import write_json_atomic

    made = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    section = {"what": "reading 100 documents' windows back from Milvus Lite: the path before and after, alternating",
               "command": "python benchmarks/bench_milvus_read.py " + " ".join(sys.argv[1:]),
               "machine": "2 CPU cores shared with other jobs (a CPU lock held for this run)",
               "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    for name in args.sets:
        section[name] = run_set(name, args.out, args.draws)
        print(name, json.dumps(section[name]), flush=True)
    made["read_path"] = section
    write_json_atomic(RESULTS, made)


if __name__ == "__main__":
    main()
