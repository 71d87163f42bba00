#!/usr/bin/env python
"""Benchmark: peak memory of the document audit for 1k vs 10k documents.

Each size runs in its own process (peak RSS is per process): load the model, note the RSS, read the
documents, run every diagnostic, note the peak RSS (``resource.getrusage``) and the peak of Python/numpy
allocations (``tracemalloc``). Token states are streamed, so what grows with n should be the per-document
data (token ids, pooled embeddings) — about the pooled embeddings' growth, far below what holding the token
states would take, which is reported for contrast.

    python -m benchmarks.audit.audit_memory        # 1k and 10k wiki1m lines → docs/results/bench_audit_memory.json
    python -m benchmarks.audit.audit_memory --sizes 500 5000 --out /tmp/mem.json

Defaults keep CPU time small: short Wikipedia sentences, elongation m = 2 ("twice"), σ_a on 20 documents
per length bin.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks._measure import peak_rss_bytes

REPO = Path(__file__).resolve().parents[2]
MODULE = "benchmarks.audit.audit_memory"  # run as python -m MODULE, from the repository root
DEFAULT_DOCS = REPO.parent / "shared" / "data" / "wiki1m_simcse_head" / "wiki1m_for_simcse.head11914.txt.gz"
DEFAULT_OUT = REPO / "docs" / "results" / "bench_audit_memory.json"
MIB = 2**20


def _rss_now_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One audit of `args.n` documents in this process; returns its memory figures."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from lengthwise.audit.config import DocAuditConfig
    from lengthwise.audit.documents.corpus import read_docs
    from lengthwise.audit.documents.documents import run_doc_audit
    from lengthwise.core.models import load_plain_model
    from lengthwise.core.tokens import Elongation

    torch.set_num_threads(args.threads)
    model = load_plain_model(args.model, device="cpu")
    after_load = _rss_now_bytes()
    tracemalloc.start()
    started = time.perf_counter()
    docs = read_docs(args.docs, max_docs=args.n, seed=0)
    config = DocAuditConfig(elongation=Elongation.parse(args.elongate), attention_per_bin=args.attention_per_bin)
    section = run_doc_audit(model, docs, config)
    seconds = time.perf_counter() - started
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak = peak_rss_bytes()
    dim = model.get_embedding_dimension() or 0
    tokens, layers = section["tokens"], len(section["intra"]["layers"])
    n, n_long = tokens["n_docs"], tokens["elongated_docs"]
    original_tokens = n * (tokens["content_mean"] + 2)  # specials included
    elongated_tokens = n_long * (tokens["m_mean_elongated"] or 0) * (tokens["content_mean"] + 2)  # ≈ upper bound
    return {
        "n_docs": n,
        "elongated_docs": n_long,
        "seconds": round(seconds, 1),
        "rss_after_model_load_mib": round(after_load / MIB, 1),
        "rss_peak_mib": round(peak / MIB, 1),
        "rss_growth_during_audit_mib": round((peak - after_load) / MIB, 1),
        "tracemalloc_peak_mib": round(traced_peak / MIB, 1),
        "pooled_embeddings_mib": round((n + n_long) * dim * 4 / MIB, 2),
        "token_states_if_held_mib": round((original_tokens + elongated_tokens) * layers * dim * 4 / MIB, 1),
        "content_tokens_mean": tokens["content_mean"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS, help="JSONL or one document per line")
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--elongate", default="twice", help="m for the elongated pass (an integer, random, twice)")
    parser.add_argument("--attention-per-bin", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        args.n = args.child
        print(json.dumps(child(args)))
        return

    runs = []
    for n in args.sizes:
        command = [sys.executable, "-m", MODULE, "--child", str(n), "--docs", str(args.docs), "--model", args.model,
                   "--elongate", args.elongate, "--attention-per-bin", str(args.attention_per_bin),
                   "--threads", str(args.threads)]  # fmt: skip
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    small, large = runs[0], runs[-1]
    from lengthwise.core.results import environment, write_json_atomic

    result = {
        "benchmark": "document audit peak memory (all diagnostics), one process per size",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": {
            "docs": str(args.docs),
            "model": args.model,
            "elongate": args.elongate,
            "attention_per_bin": args.attention_per_bin,
            "threads": args.threads,
        },
        "runs": runs,
        "ratios_large_over_small": {
            "documents": round(large["n_docs"] / small["n_docs"], 2),
            "pooled_embeddings": round(large["pooled_embeddings_mib"] / small["pooled_embeddings_mib"], 2),
            "rss_peak": round(large["rss_peak_mib"] / small["rss_peak_mib"], 2),
            "rss_growth_during_audit": round(
                large["rss_growth_during_audit_mib"] / max(small["rss_growth_during_audit_mib"], 1e-9), 2
            ),
            "tracemalloc_peak": round(large["tracemalloc_peak_mib"] / small["tracemalloc_peak_mib"], 2),
        },
        "environment": environment(),
    }
    write_json_atomic(args.out, result)
    print(json.dumps(result["ratios_large_over_small"]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
