"""`index tune --tokens` on the repository's corpora (issue 64, step 5): on each corpus the search mode, fusion and
token weight chosen on its dev split (`tune_hybrid` on a copy of its index), then nDCG@10 on its test split through
the index (`evaluate_through_index`), against the untuned default hybrid and the default token stage (w = 0.4, the
tokens of the best 8 windows). The windows and one-bit token folders are those of `benchmarks.search.tokens` (built
here when absent, resumable); the index is built from them with every default (``index-default``: BM25 at both
granularities, as `lengthwise index build` makes it).

    python -m benchmarks.search.tune_tokens --sets qmsum,newsgroups,scifact    # writes docs/results/token_tune.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks._measure import command_line
from benchmarks.search.hybrid._common import (
    ROOT,
    _indexed,
    _load,
    _retrieval_sets,
    _scifact_beir,
    corpus_options,
)

RESULTS = ROOT / "docs" / "results" / "token_tune.json"


def _beir(name: str, args: argparse.Namespace) -> Path:
    return _scifact_beir(args) if name == "scifact" else Path(getattr(args, name))


def one_corpus(name: str, entry: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The tuning on dev and the three searches on test for one corpus."""
    import lengthwise as lw
    from lengthwise.evaluation.config import EvalConfig
    from lengthwise.longdoc.storage.tokens import encode_tokens
    from lengthwise.pipelines import evaluate_through_index, tune_hybrid
    from lengthwise.search.types import TokenChoice

    _indexed(name, entry["ids"], entry["texts"], args, entry.get("corpus"))  # the windows encoded (resumable)
    default = args.work / name / "index-default"  # built with every default (BM25 at both granularities)
    if not (default / "index.json").is_file():
        lw.LongIndex.build(args.work / name / "encoded", default)
    index = lw.LongIndex.open(default)
    beir = _beir(name, args)
    corpus = entry.get("corpus") or args.work / name / "corpus.jsonl"
    tokens = args.work / name / "tokens-auto"
    started = time.perf_counter()
    encode_tokens(corpus, tokens, args.model, shard_docs=8, threads=args.threads, show_progress=True)
    encoded = time.perf_counter() - started
    tuned = args.work / name / "index-tuned"
    shutil.rmtree(tuned, ignore_errors=True)
    shutil.copytree(index.folder, tuned)  # the tuning is recorded in the index it tunes: a copy of the default's
    started = time.perf_counter()
    chosen = tune_hybrid(tuned, beir, split="dev", tokens=tokens)
    seconds = time.perf_counter() - started
    test = EvalConfig(task="retrieval", data=beir, split="test")
    runs = {"hybrid (default)": (index.folder, None), "hybrid + tokens (default)": (index.folder, TokenChoice(tokens)),
            "tuned, without tokens": (tuned, None), "tuned, with tokens": (tuned, TokenChoice(tokens))}  # fmt: skip
    scores = {}
    for arm, (folder, stage) in runs.items():
        record = evaluate_through_index(test, folder, tokens=stage)
        scores[arm] = round(record["scores"]["ndcg@10"], 2)
        print(f"{name} test, {arm}: nDCG@10 {scores[arm]:.2f}", flush=True)
    return {"dev": {arm: round(value, 2) for arm, value in chosen["scores"].items()},
            "chosen": {key: chosen[key] for key in ("mode", "fusion", "tokens")}, "test": scores,
            "tune_seconds": round(seconds, 1), "token_encode_seconds": round(encoded, 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(parser, "qmsum,newsgroups,scifact")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from lengthwise.core.results import environment, write_json_atomic

    started, load = time.perf_counter(), _load()
    sets = _retrieval_sets(args)
    for name in args.sets:  # in the order asked; the results file written after each corpus
        found = one_corpus(name, sets[name], args)
        earlier = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        run = {
            "corpus": name,
            "load": [load, _load()],
            "seconds": round(time.perf_counter() - started),
            "command": command_line("benchmarks.search.tune_tokens", argv),
        }
        write_json_atomic(RESULTS, {**earlier, "corpora": {**earlier.get("corpora", {}), name: found},
                                    "model": args.model, "environment": environment(),
                                    "runs": [*earlier.get("runs", []), run]})  # fmt: skip


if __name__ == "__main__":
    main()
