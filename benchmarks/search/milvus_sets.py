"""The Milvus backend against the local index on whole benchmark corpora (issue 50's equivalence goal): recall@10
against the exact scan of every document (dense, and hybrid with the exact fused scan), the same top-10 as the local
index, build and load time, p50 query latency side by side, bytes per window; docs/benchmarks.md quotes the JSON.

    python -m benchmarks.search.milvus_sets --sets scifact qmsum --queries 40
    python -m benchmarks.search.milvus_sets --sets passkey needle --queries 8

Each corpus's windows are the ones `python -m benchmarks.search.hybrid quality` encoded (all-MiniLM-L6-v2, its
multi-vector default) under --work (read only): SciFact and QMSum, and the test sets of realistic passkey and needle
(seed 0, 10 documents per length, 256 … 32,768 tokens, regenerated here as bench_hybrid makes them, for their
queries). The local index is built here with the defaults (USearch, int8 candidates, BM25 at --granularity, ``both``
by default as `index build`), then loaded into an embedded Milvus Lite (--out). A synthetic set asks --queries of
its items spread over its lengths (every n-th); a retrieval set its first --queries test queries. Latency: one query
at a time, one search thread, the query vector embedded beforehand (the same for both). Written to
docs/results/bench_milvus.json, one section per corpus, with its command, the granularity and the load average
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import disk_bytes, recall

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "bench_milvus.json"
SETS = {  # name → (the corpus file, the BEIR folder whose test queries are asked; None: a synthetic set's items)
    "scifact": ("scifact/corpus.jsonl", Path(os.environ.get("SCIFACT", ROOT.parent / "shared" / "data" / "scifact"))),
    "qmsum": (str(ROOT / "data" / "qmsum" / "corpus.jsonl.gz"), ROOT / "data" / "qmsum"),
    "passkey": ("passkey-test/corpus.jsonl", None),
    "needle": ("needle-test/corpus.jsonl", None),
}
SYNTHETIC_PER_LENGTH, SYNTHETIC_SEED = 10, 0  # bench_hybrid quality's test sets (--per-length, the test seed)


def _timed(search: Any, vectors: np.ndarray, texts: list[str], mode: str) -> tuple[list[list[str]], list[float]]:
    """Each query searched alone: its top-10 ids and its milliseconds."""
    ids, times = [], []
    for n, text in enumerate(texts):
        start = time.perf_counter()
        hits = search([text], k=10, mode=mode, vectors=vectors[n : n + 1], search_threads=1)[0]
        times.append(1000 * (time.perf_counter() - start))
        ids.append([hit.id for hit in hits])
    return ids, times


def _synthetic_queries(name: str, count: int) -> list[str]:
    """`count` queries of the synthetic test set `name` (passkey or needle), spread over its lengths: its items made
    again as bench_hybrid makes them (the corpus they index is checked against the encoded digest at the build)."""
    from benchmarks.search.hybrid._common import LENGTHS, _synthetic_sets
    from lengthwise.core.models import load_plain_model

    tokenizer = load_plain_model("sentence-transformers/all-MiniLM-L6-v2").tokenizer
    made = argparse.Namespace(per_length=SYNTHETIC_PER_LENGTH, dev_per_length=1)
    items = _synthetic_sets(made, tokenizer)[f"{name}-test"]["data"].items
    assert len(items) == SYNTHETIC_PER_LENGTH * len(LENGTHS)
    return [item.query for item in items[:: max(1, len(items) // count)][:count]]


def run_set(name: str, args: argparse.Namespace) -> dict[str, Any]:
    import lengthwise as lw
    from lengthwise.core.fusion import Mode
    from lengthwise.evaluation.data import read_beir
    from lengthwise.search.milvus.load import load_into_milvus

    corpus, beir = SETS[name]
    corpus_path = Path(corpus) if Path(corpus).is_absolute() else args.work / corpus
    encoded = corpus_path.parent / "encoded" if beir is None else args.work / name / "encoded"
    out = args.out / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    texts = (
        list(read_beir(beir, "test").query_texts)[: args.queries] if beir else _synthetic_queries(name, args.queries)
    )
    start = time.perf_counter()
    local = lw.LongIndex.build(encoded, out / "index", text=corpus_path, granularity=args.granularity,
                               load_model=lw.load_model)  # fmt: skip
    result: dict[str, Any] = {"documents": len(local.doc_ids), "windows": int(local.offsets[-1]),
                              "queries": len(texts), "granularity": local.lexical.settings["granularity"],
                              "local_build_s": time.perf_counter() - start}  # fmt: skip
    start = time.perf_counter()
    engine = load_into_milvus(local, str(out / "milvus.db"), name)
    result["milvus_load_s"] = time.perf_counter() - start
    result["local_bytes_per_window"] = disk_bytes(out / "index") / result["windows"]
    result["milvus_bytes_per_window"] = disk_bytes(out / "milvus.db") / result["windows"]
    vectors = np.asarray(local.embed_queries(texts), dtype=np.float32)
    engine.model = local.model
    for mode in ("dense", "hybrid"):
        exact = [[d for d, _ in row] for row in local.ranked_with_exact(texts, 10, Mode(mode))["exact"]]
        near, local_ms = _timed(local.search, vectors, texts, mode)
        found, milvus_ms = _timed(engine.search, vectors, texts, mode)
        result[mode] = {
            "milvus_recall_at_10_vs_exact": recall(found, exact),
            "local_recall_at_10_vs_exact": recall(near, exact),
            "same_top10_ids_as_local": float(np.mean([a == b for a, b in zip(found, near, strict=True)])),
            "milvus_p50_ms": statistics.median(milvus_ms),
            "local_p50_ms": statistics.median(local_ms),
        }
        print(name, mode, json.dumps(result[mode]), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--queries", type=int, default=40, help="the first N test queries of each set")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid"), help="bench_hybrid's")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_milvus_sets"))
    parser.add_argument("--granularity", default="both", choices=["both", "window", "document"], help="BM25's")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from importlib.metadata import version

    from lengthwise.core.results import write_json_atomic

    made = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    command = "python -m benchmarks.search.milvus_sets " + " ".join(sys.argv[1:])
    made.update({"what": "the Milvus backend (embedded Milvus Lite) beside the local index on whole corpora",
                 "command": command,
                 "versions": {p: version(p) for p in ("pymilvus", "milvus-lite", "usearch")},
                 "machine": "2 CPU cores shared with other jobs (a CPU lock held for this run)"})  # fmt: skip
    for name in args.sets:
        before = os.getloadavg()
        section = run_set(name, args)
        made[name] = {**section, "command": command, "loadavg_before": before, "loadavg_after": os.getloadavg(),
                      "date": time.strftime("%Y-%m-%d"), "versions": made["versions"]}  # fmt: skip
        write_json_atomic(RESULTS, made)
    print(json.dumps(made, indent=1))


if __name__ == "__main__":
    main()
