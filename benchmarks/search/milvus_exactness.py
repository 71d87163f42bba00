"""Which of Milvus Lite's searches are exact: the check behind the Milvus backend's rescoring (issue 50).

The backend scores a proposed document on the engine's similarities of that document's windows, from a dense search
filtered to their rows. That is exact only where the search compared every window it kept. This measures, on
`--rows` real window vectors (the scale index's: all-MiniLM-L6-v2 windows with noise), 20 windows a document, with
IVF_FLAT (nlist 1,024), the index the backend asks Milvus Lite 2.x for:

- the 100 nearest windows of a query against an exact scan (numpy), at several ``nprobe``: is the ``nprobe`` asked
  for the one searched?
- a search filtered to the windows of a random share of the documents, two ways:
  - grouped by document (``group_by_field="doc"``, one window a group): how many documents came back with a lower
    similarity than their best window's (a score lowered unseen), and how many did not come back;
  - every window asked for (``limit`` = their count): how many did not come back (the backend sees that, and reads
    the vectors instead), and how far the similarities that came back are from numpy's.

It runs without lengthwise (pymilvus, milvus-lite, numpy):

    python -m benchmarks.search.milvus_exactness --vectors /work/h51scale/index/generation-*/vectors.npy

It writes the section ``rows-{rows}`` of docs/results/bench_milvus_exactness.json, with the versions and the load
average before and after. The database goes to a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.search.milvus_lite25 import write_section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "bench_milvus_exactness.json"
PER_DOC = 20
QUERIES = 10
SHARES = (0.001, 0.01, 0.1, 0.5)  # of the documents a filter keeps
PROBES = (1, 16, 64, 1_024)


def _load(client: Any, vectors: np.ndarray, batch: int = 500) -> None:
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("doc", DataType.INT64)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=vectors.shape[1])
    index = client.prepare_index_params()
    index.add_index("dense", index_type="IVF_FLAT", metric_type="IP", params={"nlist": 1024})
    client.create_collection("windows", schema=schema, index_params=index)
    for first in range(0, len(vectors), batch):
        part = vectors[first : first + batch].tolist()
        client.insert("windows", [{"id": first + i, "doc": (first + i) // PER_DOC, "dense": row}
                                  for i, row in enumerate(part)])  # fmt: skip
    client.flush("windows")
    client.release_collection("windows")
    client.load_collection("windows")  # as an index opened to serve: loaded from the file


def _search(client: Any, query: np.ndarray, limit: int, probes: int, **extra: Any) -> Any:
    return client.search("windows", [query.tolist()], anns_field="dense", limit=limit, output_fields=["doc"],
                         search_params={"metric_type": "IP", "params": {"nprobe": probes}}, **extra)[0]  # fmt: skip


def _nearest(client: Any, queries: np.ndarray, similarities: np.ndarray) -> dict[str, Any]:
    """Recall@100 of the nearest windows against the exact scan, and the p50 of the search, by ``nprobe``."""
    out = {}
    for probes in PROBES:
        recalls, spent = [], []
        for query, exact in zip(queries, similarities, strict=True):
            start = time.perf_counter()
            found = _search(client, query, 100, probes)
            spent.append(1000 * (time.perf_counter() - start))
            recalls.append(len({int(h["id"]) for h in found} & set(np.argsort(-exact)[:100].tolist())) / 100)
        out[f"nprobe_{probes}"] = {"recall_at_100": statistics.mean(recalls), "p50_ms": statistics.median(spent)}
    return out


def _filtered(client: Any, queries: np.ndarray, similarities: np.ndarray, rng: Any) -> dict[str, Any]:
    """Per share of the documents kept (at most 819, whose 16,384 windows one search returns): the grouped
    search's lowered and missing documents, the every-window search's missing windows (sums over the queries) and
    its largest error in a window's similarity against numpy's."""
    docs_total = similarities.shape[1] // PER_DOC
    out = {}
    for share in SHARES:
        kept_docs = min(max(1, int(share * docs_total)), 16_384 // PER_DOC)  # a search returns 16,384 at most
        lowered = missing = missing_windows = asked_windows = 0
        error = 0.0
        for query, exact in zip(queries, similarities, strict=True):
            docs = np.sort(rng.choice(docs_total, kept_docs, replace=False))
            best = exact[: docs_total * PER_DOC].reshape(docs_total, PER_DOC).max(axis=1)
            grouped = _search(client, query, len(docs), 1_024, filter=f"doc in {docs.tolist()}",
                              group_by_field="doc", group_size=1)  # fmt: skip
            lowered += sum(float(h["distance"]) < best[int(h["entity"]["doc"])] - 1e-4 for h in grouped)
            missing += len(docs) - len(grouped)
            every = _search(client, query, len(docs) * PER_DOC, 1_024, filter=f"doc in {docs.tolist()}")
            missing_windows += len(docs) * PER_DOC - len(every)
            errors = [abs(float(h["distance"]) - float(exact[int(h["id"])])) for h in every]
            error = max([error, *errors])
            asked_windows += len(docs) * PER_DOC
        out["share_" + f"{share:g}".replace(".", "p")] = {  # no dot in a key (docs figures)
            "documents_per_query": kept_docs, "share_of_rows_kept": kept_docs / docs_total,
            "grouped_lowered_documents": int(lowered), "grouped_missing_documents": int(missing),
            "every_window_missing_windows": int(missing_windows), "every_window_asked_windows": int(asked_windows),
            "every_window_largest_similarity_error": error,
        }  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=Path, required=True, help="a (windows, dim) float32 .npy (memory-mapped)")
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    from pymilvus import MilvusClient

    source = np.load(args.vectors, mmap_mode="r")
    if len(source) < args.rows:
        raise SystemExit(f"error: {args.vectors} holds {len(source)} vectors; ask for --rows {len(source)} or fewer")
    vectors = np.asarray(source[: args.rows], dtype=np.float32)
    folder = Path(tempfile.mkdtemp(prefix="bench-milvus-exactness-"))
    before, rng = os.getloadavg(), np.random.default_rng(0)
    client = MilvusClient(str(folder / "milvus.db"))
    try:
        _load(client, vectors)
        queries = np.asarray(source[rng.integers(len(source) - 100_000, len(source), QUERIES)], dtype=np.float32)
        similarities = queries @ vectors.T
        result = {
            "rows": args.rows, "dim": int(vectors.shape[1]), "per_document": PER_DOC, "queries": QUERIES,
            "vectors": str(args.vectors), "index": "IVF_FLAT, nlist 1024 (as the backend asks Milvus Lite 2.x)",
            "versions": {p: version(p) for p in ("pymilvus", "milvus-lite")},
            "nearest": _nearest(client, queries, similarities),
            "filtered": _filtered(client, queries, similarities, rng),
            "loadavg_before": before, "loadavg_after": os.getloadavg(), "date": time.strftime("%Y-%m-%d"),
        }  # fmt: skip
    finally:
        client.close()
        shutil.rmtree(folder, ignore_errors=True)
    write_section(RESULTS, f"rows-{args.rows}", result)


if __name__ == "__main__":
    main()
