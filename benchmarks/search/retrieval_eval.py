#!/usr/bin/env python
"""Benchmark: retrieval evaluation (`evaluate_retrieval`) against encoding alone, wall time and peak memory.

Each measurement runs in its own fresh subprocess, so its peak resident memory (`peak_rss_bytes`) is its own:

- ``evaluate``: load the model and the BEIR data; encode the corpus and the judged queries (timed: *encode
  alone*, peak memory after it); then run `evaluate_retrieval` with length bins on those same embeddings (served
  by a caching encoder, so nothing is encoded twice): chunked exact search, pytrec_eval and the per-bin ranks of
  every relevant document. Full evaluation = encode + that; peak memory after it shows what evaluation adds.
- ``search`` (synthetic): random unit vectors, search only — chunked `exact_search` against one brute-force
  ``Q × N`` similarity matrix — to show that the corpus matrix is the only large object.

    python -m benchmarks.search.retrieval_eval                         # SciFact, all-MiniLM-L6-v2
    python -m benchmarks.search.retrieval_eval --synthetic --out /tmp/b.json

Model and data loading are reported apart (``load_s``) and never counted in the timed phase.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._measure import peak_rss_bytes

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "scifact"
DEFAULT_OUT = REPO / "docs" / "results" / "bench_retrieval_eval.json"

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _peak_mib() -> float:
    return peak_rss_bytes() / 2**20


def _child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One measurement, run inside a fresh interpreter."""
    import torch

    torch.set_num_threads(args.threads)
    if mode == "search":
        return _child_search(args)
    from lengthwise.core.embed import TokenView
    from lengthwise.core.encoder import as_encoder
    from lengthwise.core.models import load_plain_model
    from lengthwise.evaluation.config import RetrievalConfig
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.retrieval import evaluate_retrieval

    started = time.perf_counter()
    model = load_plain_model(args.model, device="cpu")
    data = read_beir(args.data, args.split)
    encoder = as_encoder(model)
    loaded = time.perf_counter()
    base = _peak_mib()
    documents = encoder.encode_documents(data.doc_texts, batch_size=args.batch_size)
    queries = encoder.encode_queries(data.query_texts, batch_size=args.batch_size)
    encoded = time.perf_counter()
    peak_encode = _peak_mib()
    cached = _CachedEncoder(
        dict(zip(data.doc_texts, documents, strict=True)), dict(zip(data.query_texts, queries, strict=True))
    )
    result = evaluate_retrieval(
        cached, data, RetrievalConfig(top_k=args.top_k), view=TokenView(model), batch_size=args.batch_size
    )
    evaluated = time.perf_counter()
    encode_s, rest_s = encoded - loaded, evaluated - encoded
    return {
        "load_s": round(loaded - started, 2),
        "encode_s": round(encode_s, 2),
        "search_score_bins_s": round(rest_s, 2),
        "evaluate_total_s": round(encode_s + rest_s, 2),
        "ratio_evaluate_to_encode": round((encode_s + rest_s) / encode_s, 4),
        "phases_s": result.timings,
        "peak_mib_after_load": round(base, 1),
        "peak_mib_after_encode": round(peak_encode, 1),
        "peak_mib_after_evaluate": round(_peak_mib(), 1),
        "embeddings_mib": round((documents.nbytes + queries.nbytes) / 2**20, 1),
        "scores": result.scores,
        "n_documents": len(data.doc_ids),
        "n_queries": len(data.query_ids),
    }


class _CachedEncoder:
    """A `TextEncoder` that serves embeddings computed earlier (the timed encode), so evaluation never re-encodes."""

    def __init__(self, documents: dict[str, Any], queries: dict[str, Any]) -> None:
        self.documents, self.queries = documents, queries

    def encode(self, texts: Any, *, batch_size: int = 32, show_progress: bool = False) -> Any:
        raise NotImplementedError("retrieval uses the query and document sides only")

    def encode_queries(self, texts: Any, *, batch_size: int = 32, show_progress: bool = False) -> Any:
        import numpy as np

        return np.stack([self.queries[text] for text in texts])

    def encode_documents(self, texts: Any, *, batch_size: int = 32, show_progress: bool = False) -> Any:
        import numpy as np

        return np.stack([self.documents[text] for text in texts])


def _child_search(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from lengthwise.core.search import exact_search

    generator = torch.Generator().manual_seed(0)
    corpus = torch.nn.functional.normalize(torch.randn(args.n_docs, 384, generator=generator), dim=1)
    queries = torch.nn.functional.normalize(torch.randn(args.n_queries, 384, generator=generator), dim=1)
    base = _peak_mib()
    started = time.perf_counter()
    if args.brute:
        torch.topk(queries @ corpus.T, args.top_k, dim=1)  # (Q, N) in one piece
    else:
        for start in range(0, args.n_queries, 256):
            exact_search(queries[start : start + 256], corpus, args.top_k, corpus_chunk=16384)
    return {
        "method": "brute force (Q x N matrix)" if args.brute else "chunked (256 queries x 16384 docs)",
        "wall_s": round(time.perf_counter() - started, 3),
        "peak_mib_after_vectors": round(base, 1),
        "peak_mib": round(_peak_mib(), 1),
        "corpus_mib": round(corpus.numel() * 4 / 2**20, 1),
        "n_documents": args.n_docs,
        "n_queries": args.n_queries,
    }


def _spawn(mode: str, extra: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.search.retrieval_eval", "--child", mode, *extra]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--synthetic", action="store_true", help="Only the synthetic search-only comparison.")
    parser.add_argument("--n-docs", type=int, default=200_000)
    parser.add_argument("--n-queries", type=int, default=1000)
    parser.add_argument("--brute", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=["evaluate", "search"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args)))
        return
    shared = ["--model", args.model, "--data", str(args.data), "--split", args.split]
    shared += ["--batch-size", str(args.batch_size), "--top-k", str(args.top_k), "--threads", str(args.threads)]
    shared += ["--n-docs", str(args.n_docs), "--n-queries", str(args.n_queries)]
    report: dict[str, Any] = {"settings": {k: str(v) for k, v in vars(args).items() if k not in {"child", "brute"}}}
    if not args.synthetic:
        report["scifact"] = _spawn("evaluate", shared)
        print("evaluate:", report["scifact"], flush=True)
    report["search_chunked"] = _spawn("search", shared)
    report["search_brute_force"] = _spawn("search", [*shared, "--brute"])
    print("search:", report["search_chunked"], report["search_brute_force"], flush=True)
    from lengthwise.core.results import environment, write_json_atomic

    report["environment"] = environment()
    write_json_atomic(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
