"""Dense retrieval evaluation in the BEIR/MTEB protocol: exact cosine top-k, scored with pytrec_eval.

Documents are embedded as ``title + " " + text`` (see `lengthwise.evaluation.data`), queries and documents through
the encoder's query/document sides, similarity is cosine. A retrieved document whose id equals the query id is
kept, as MTEB keeps it, unless `RetrievalConfig.drop_self_hits` says to drop it, as MTEB does for the tasks that
set ``ignore_identical_ids`` (ArguAna and Quora queries are corpus documents; `lengthwise.evaluation.tasks`
decides by task). Search runs over query chunks × corpus chunks with a running `torch.topk`, so the (N, D)
corpus embedding matrix is the only large object in memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lengthwise.core.bins import LengthBins, per_bin, token_lengths
from lengthwise.core.embed import TokenView
from lengthwise.core.encoder import MultiVectorEncoder, MultiVectors, TextEncoder, multi_vector_scores
from lengthwise.core.scoring import WindowScoring
from lengthwise.core.search import exact_search, relevant_ranks
from lengthwise.evaluation.config import RetrievalConfig
from lengthwise.evaluation.data import RetrievalData
from lengthwise.evaluation.schema import RetrievalRecord

__all__ = [
    "RetrievalResult",
    "evaluate_retrieval",
    "search_run",
    "trec_scores",
]


def _normalized(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.as_tensor(x, dtype=torch.float32), dim=-1)


def search_run(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    config: RetrievalConfig,
    exclude: Sequence[int],
) -> dict[str, dict[str, float]]:
    """The trec run ``{query_id: {doc_id: score}}`` of the top-k documents of each (normalised) query row.

    `exclude[i]` is the corpus row query i must not retrieve (-1: none); it never enters the run, even when the
    corpus holds no more than k documents (`exact_search` then returns it last, at score −inf).
    """
    scores, index = exact_search(queries, corpus, config.top_k, corpus_chunk=config.corpus_chunk, exclude=exclude)
    return {
        qid: {doc_ids[j]: float(s) for s, j in zip(row_scores.tolist(), row_index.tolist(), strict=True) if j != skip}
        for qid, row_scores, row_index, skip in zip(query_ids, scores, index, exclude, strict=True)
    }


def _multi_vector_scores(
    queries: torch.Tensor, corpus: MultiVectors, scoring: WindowScoring, exclude: Sequence[int]
) -> torch.Tensor:
    """Exact late-interaction scores (Q, N) of a multi-vector corpus (METHODS §5), the excluded self-hits at −inf."""
    scores = torch.cat([multi_vector_scores(queries[i : i + 64], corpus, scoring) for i in range(0, len(queries), 64)])
    rows = torch.as_tensor(exclude, dtype=torch.long)
    hit = (rows >= 0).nonzero().squeeze(1)
    scores[hit, rows[hit]] = float("-inf")
    return scores  # (Q, N)


def _multi_vector_run(
    scores: torch.Tensor, query_ids: Sequence[str], doc_ids: Sequence[str], config: RetrievalConfig
) -> dict[str, dict[str, float]]:
    """`search_run` for precomputed (Q, N) scores: the top-k documents of each query, −inf ones left out."""
    best, index = torch.topk(scores, min(config.top_k, scores.shape[1]), dim=1)
    return {
        qid: {doc_ids[j]: float(v) for v, j in zip(row.tolist(), cols.tolist(), strict=True) if v != float("-inf")}
        for qid, row, cols in zip(query_ids, best, index, strict=True)
    }


def trec_scores(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], config: RetrievalConfig
) -> dict[str, dict[str, float]]:
    """Per-query nDCG@k, MRR@k, recall@k, MAP@k (fractions) with pytrec_eval, as MTEB computes them.

    MRR@k is trec_eval's ``recip_rank`` on the run cut to its k best (score, then doc id, descending: trec order).
    """
    import pytrec_eval

    measures = {f"ndcg_cut.{config.ndcg_k}", f"recall.{config.recall_k}", f"map_cut.{config.map_k}"}
    full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    cut = {
        qid: dict(sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)[: config.mrr_k])
        for qid, docs in run.items()
    }
    reciprocal = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    return {
        qid: {
            f"ndcg@{config.ndcg_k}": values[f"ndcg_cut_{config.ndcg_k}"],
            f"mrr@{config.mrr_k}": reciprocal.get(qid, {}).get("recip_rank", 0.0),
            f"recall@{config.recall_k}": values[f"recall_{config.recall_k}"],
            f"map@{config.map_k}": values[f"map_cut_{config.map_k}"],
        }
        for qid, values in full.items()
    }


@dataclass(frozen=True)
class RetrievalResult:
    """Means ×100 over judged queries, per-bin tables of queries and of relevant documents, and timings (s)."""

    scores: dict[str, float]
    n_queries: int
    n_documents: int
    query_bins: list[dict[str, Any]] = field(default_factory=list)
    document_bins: list[dict[str, Any]] = field(default_factory=list)
    bin_spec: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False, compare=False)  # for paired tests

    def to_dict(self) -> RetrievalRecord:
        return {
            "scores": dict(self.scores),
            "n_queries": self.n_queries,
            "n_documents": self.n_documents,
            "config": self.config,
            "timings_s": self.timings,
            "bins": {
                "spec": self.bin_spec,
                "queries": {"by": "query length; metrics = means over the bin's queries", "rows": self.query_bins},
                "documents": {
                    "by": "relevant document length; one item per (query, relevant document) judgement",
                    "rows": self.document_bins,
                },
            },
        }


def _mean100(values: np.ndarray) -> float:
    return round(100.0 * float(np.mean(values)), 4)


def _document_bin_metrics(ranks: np.ndarray, config: RetrievalConfig) -> dict[str, float | None]:
    return {
        f"recall@{config.ndcg_k}": _mean100(ranks <= config.ndcg_k),
        f"recall@{config.recall_k}": _mean100(ranks <= config.recall_k),
        "mrr": _mean100(1.0 / ranks),
        "mean_rank": float(np.mean(ranks)),
        "median_rank": float(np.median(ranks)),
    }


def evaluate_retrieval(
    encoder: TextEncoder,
    data: RetrievalData,
    config: RetrievalConfig | None = None,
    *,
    view: TokenView | None = None,
    bins: LengthBins | None = None,
    batch_size: int = 32,
    show_progress: bool = False,
) -> RetrievalResult:
    """Encode the corpus and the judged queries, search exactly, score with pytrec_eval; bin when `view` is given."""
    config = config or RetrievalConfig()
    started = time.perf_counter()
    multi = (
        encoder if isinstance(encoder, MultiVectorEncoder) and encoder.is_multi_vector else None
    )  # exact over windows
    if multi is not None:
        windows = multi.encode_documents_multi(data.doc_texts, batch_size=batch_size, show_progress=show_progress)
    else:
        corpus = _normalized(
            encoder.encode_documents(data.doc_texts, batch_size=batch_size, show_progress=show_progress)
        )
    queries = _normalized(encoder.encode_queries(data.query_texts, batch_size=batch_size, show_progress=show_progress))
    encoded = time.perf_counter()
    doc_position = {doc_id: i for i, doc_id in enumerate(data.doc_ids)}
    exclude = [doc_position.get(qid, -1) if config.drop_self_hits else -1 for qid in data.query_ids]
    per_query: dict[str, dict[str, float]] = {}
    if multi is not None:
        full = _multi_vector_scores(queries, windows, multi.window_scoring, exclude)  # (Q, N)
    for start in range(0, len(data.query_ids), config.query_chunk):
        stop = start + config.query_chunk
        query_ids = data.query_ids[start:stop]
        if multi is not None:
            run = _multi_vector_run(full[start:stop], query_ids, data.doc_ids, config)
        else:
            run = search_run(queries[start:stop], corpus, query_ids, data.doc_ids, config, exclude[start:stop])
        per_query.update(trec_scores({qid: data.qrels[qid] for qid in run}, run, config))
    searched = time.perf_counter()
    metric_names = list(next(iter(per_query.values())))
    judged = [qid for qid in data.query_ids if qid in per_query]
    table = np.asarray([[per_query[qid][name] for name in metric_names] for qid in judged])  # (Q, M)
    headline = {name: _mean100(table[:, m]) for m, name in enumerate(metric_names)}
    query_rows: list[dict[str, Any]] = []
    doc_rows: list[dict[str, Any]] = []
    if view is not None:
        bins = bins or LengthBins.for_view(view)
        query_position = {qid: i for i, qid in enumerate(data.query_ids)}
        query_bins = bins.assign(token_lengths(view, [data.query_texts[query_position[qid]] for qid in judged]))
        query_rows = per_bin(
            bins, query_bins, lambda mask: {name: _mean100(table[mask, m]) for m, name in enumerate(metric_names)}
        )
        doc_lengths = token_lengths(view, data.doc_texts)
        pairs = [
            (query_position[qid], doc_position[doc])
            for qid in judged
            for doc, relevance in data.qrels[qid].items()
            if relevance > 0 and doc in doc_position and not (config.drop_self_hits and doc == qid)
        ]  # a dropped self-hit is never retrieved, so it has no rank
        pair_q, pair_d = np.asarray(pairs, dtype=np.int64).reshape(-1, 2).T
        if multi is not None:  # 1 + documents scoring strictly higher (the excluded self-hit sits at −inf)
            ranks = ((full[pair_q] > full[pair_q, pair_d][:, None]).sum(dim=1) + 1).numpy()
        else:
            ranks = relevant_ranks(queries, corpus, pair_q, pair_d, corpus_chunk=config.corpus_chunk, exclude=exclude)
        doc_bins = bins.assign(doc_lengths)
        corpus_counts = np.bincount(doc_bins, minlength=len(bins.labels()))
        doc_rows = per_bin(bins, doc_bins[pair_d], lambda mask: _document_bin_metrics(ranks[mask], config))
        for row, corpus_count in zip(doc_rows, corpus_counts.tolist(), strict=True):
            row["corpus_count"] = corpus_count
    return RetrievalResult(
        scores=headline,
        n_queries=len(judged),
        n_documents=len(data.doc_ids),
        query_bins=query_rows,
        document_bins=doc_rows,
        bin_spec=bins.describe() if (view is not None and bins is not None) else None,
        timings={
            "encode": round(encoded - started, 3),
            "search_and_score": round(searched - encoded, 3),
            "bins": round(time.perf_counter() - searched, 3),
        },
        config=config.to_dict(),
        per_query={qid: per_query[qid] for qid in judged},
    )
