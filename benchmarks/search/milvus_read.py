"""Where a Milvus dense query's time goes, and its window read path before and after (issue 50): the windows of 100
documents read back from the engine for the exact rescoring, by the path as it was (rows with ``id``, ``doc`` and
``dense`` as Python lists, sorted as dicts, then one array) and by `MilvusWindows._windows` now (a `MilvusIndex`'s
``windows``; ``strict_float32``: each row's vector a view of one float32 array; the document from the row number),
alternating in one run on the same documents (three draws of 100, seeded), with the load average before and after;
the two give the same arrays.

    python -m benchmarks.search.milvus_sets --sets scifact passkey   # the loads this reads (under --out)
    python -m benchmarks.search.milvus_read --sets scifact passkey
    python -m benchmarks.search.milvus_read --settle scifact --queries 8

``--settle SET``: the local index bench_milvus_sets built for SET loaded into a new Milvus Lite database with the
load's last step skipped (`lengthwise.search.milvus.load._settled`: flush, release, load), p50 of --queries dense
and lexical queries right after; then that step, its seconds, and the same queries again, in one run.

Written to docs/results/bench_milvus.json, sections ``read_path`` and ``settle``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import command_line

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "bench_milvus.json"


def _before(engine: Any, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`MilvusWindows._windows` as it was before the read path changed (documents of at most SEARCH_LIMIT windows)."""
    from lengthwise.search.milvus.store import SEARCH_LIMIT

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
    from lengthwise.facade import MilvusIndex

    engine = MilvusIndex.open(str(out / name / "milvus.db"), name)
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {"before": [], "after": []}
    windows = []
    before = os.getloadavg()
    for _ in range(draws):
        docs = np.sort(rng.choice(len(engine.doc_ids), size=min(100, len(engine.doc_ids)), replace=False))
        made = []
        for label, read in (("before", lambda d: _before(engine, d)), ("after", engine.windows._windows)):
            start = time.perf_counter()
            made.append(read(docs))
            times[label].append(time.perf_counter() - start)
        assert all(np.array_equal(a, b) for a, b in zip(*made, strict=True)), "the two paths differ"
        windows.append(len(made[0][0]))
    engine.client.close()
    return {"windows_per_read": windows, "before_s": times["before"], "after_s": times["after"],
            "before_median_s": statistics.median(times["before"]), "after_median_s": statistics.median(times["after"]),
            "loadavg_before": before, "loadavg_after": os.getloadavg()}  # fmt: skip


def settle(name: str, out: Path, queries: int) -> dict[str, Any]:
    import lengthwise as lw
    from benchmarks.search.milvus_sets import SETS
    from lengthwise.evaluation.data import read_beir
    from lengthwise.search.milvus import load as backend
    from lengthwise.search.milvus.store import DOCUMENTS, RECORDS

    local = lw.LongIndex.open(out / name / "index", load_model=lw.load_model)
    texts = list(read_beir(SETS[name][1], "test").query_texts)[:queries]
    vectors = np.asarray(local.embed_queries(texts), dtype=np.float32)
    folder = out / f"{name}-settle"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    settled, backend._settled = backend._settled, lambda *collections: None
    try:
        engine = backend.load_into_milvus(local, str(folder / "milvus.db"), name)
    finally:
        backend._settled = settled

    def p50(mode: str) -> float:
        times = []
        for n, text in enumerate(texts):
            start = time.perf_counter()
            engine.search([text], k=10, mode=mode, vectors=vectors[n : n + 1], search_threads=1)
            times.append(1000 * (time.perf_counter() - start))
        return statistics.median(times)

    result: dict[str, Any] = {"queries": len(texts), "loadavg_before": os.getloadavg()}
    result["unsettled_p50_ms"] = {mode: p50(mode) for mode in ("dense", "lexical")}
    collections = [engine.collection + suffix for suffix in ("", RECORDS, DOCUMENTS)]
    start = time.perf_counter()
    backend._settled(engine.client, *[c for c in collections if engine.client.has_collection(c)])
    result["settle_s"] = time.perf_counter() - start
    result["settled_p50_ms"] = {mode: p50(mode) for mode in ("dense", "lexical")}
    result["loadavg_after"] = os.getloadavg()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=["scifact", "passkey"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_milvus_sets"), help="bench_milvus_sets's")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--settle", help="measure a load before and after its last step, on this set")
    parser.add_argument("--queries", type=int, default=8, help="--settle: the first N test queries")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lengthwise.core.results import write_json_atomic

    made = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if args.settle:
        section = settle(args.settle, args.out, args.queries)
        made["settle"] = {"set": args.settle, **section, "date": time.strftime("%Y-%m-%d"),
                          "command": command_line("benchmarks.search.milvus_read")}  # fmt: skip
        print(json.dumps(made["settle"]), flush=True)
        write_json_atomic(RESULTS, made)
        return
    section = {"what": "reading 100 documents' windows back from Milvus Lite: the path before and after, alternating",
               "command": command_line("benchmarks.search.milvus_read"),
               "machine": "2 CPU cores shared with other jobs (a CPU lock held for this run)",
               "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    for name in args.sets:
        section[name] = run_set(name, args.out, args.draws)
        print(name, json.dumps(section[name]), flush=True)
    made["read_path"] = section
    write_json_atomic(RESULTS, made)


if __name__ == "__main__":
    main()
