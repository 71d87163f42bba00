"""The retrieval length-bias audit (METHODS §6): does a retriever rank by length instead of relevance?

`audit_retrieval` embeds the corpus and the queries once and measures the *natural* bias on the data as it is
(rank of relevant documents against their length, the lengths of the top k, score against length among
non-relevant documents). It then perturbs each sampled (query, relevant document) pair at the token level —
dilution, repetition, position (`lengthwise.audit.retrieval.perturb`) — embeds only the perturbed documents and
ranks them against the cached corpus (`lengthwise.core.search.score_ranks`). Each pair is its own control.

Any `TextEncoder` works (a plain model, TempScale, a long-document encoder). The token view gives the tokenizer;
perturbed ids reach the encoder as decoded text, and the audit checks that this text tokenizes back to the
same ids. A document longer than the window is first cut to its first tokens so the whole perturbed sequence
fits, as the encoder's truncation would cut it; `n_cut` says how many pairs that touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from lengthwise.audit.retrieval.config import RetrievalAuditConfig, RetrievalSplit
from lengthwise.audit.retrieval.controlled import controlled_bias
from lengthwise.audit.retrieval.result import Natural, RetrievalBias, SearchBias, verdicts
from lengthwise.audit.retrieval.sides import SearchSides, blocks, top_k_rows
from lengthwise.audit.retrieval.stats import (
    length_percentiles,
    mean_ci,
    partial_spearman,
    spearman,
    two_sample_ks,
    wilcoxon_p,
)
from lengthwise.core.bins import LengthBins, per_bin, token_lengths
from lengthwise.core.embed import TokenView, embed_side
from lengthwise.core.encoder import TextEncoder
from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.core.search import exact_search, relevant_ranks

if TYPE_CHECKING:
    from lengthwise.audit.retrieval.config import LexicalScorer

__all__ = ["audit_retrieval"]

Progress = Callable[[str, int, int], None]


class _Ranking(NamedTuple):
    """What the natural part needs of a search: each pair's rank, each query's top k, the score rows by block."""

    ranks: np.ndarray  # (P,)
    top_k: np.ndarray  # (Q, k) corpus rows
    blocks: Callable[[], Iterator[np.ndarray]]  # (b, N) score blocks, queries in order


def _length_summary(lengths: np.ndarray) -> dict[str, float]:
    q25, median, q75 = np.percentile(lengths, [25, 50, 75])
    return {"mean": float(lengths.mean()), "q25": float(q25), "median": float(median), "q75": float(q75)}


def _dense_ranking(queries: torch.Tensor, corpus: torch.Tensor, pairs, exclude, k: int) -> _Ranking:
    """The dense search's ranking: exact cosines, one corpus chunk (and 64 queries) at a time."""

    def blocks() -> Iterator[np.ndarray]:
        for start in range(0, queries.shape[0], 64):
            yield (queries[start : start + 64] @ corpus.T).numpy()  # (b, N)

    ranks = relevant_ranks(queries, corpus, pairs[0], pairs[1], exclude=exclude)
    return _Ranking(ranks, exact_search(queries, corpus, k, exclude=exclude)[1].numpy(), blocks)


def _matrix_ranking(matrix: np.ndarray, pairs, k: int) -> _Ranking:
    """A ranking from a full (Q, N) score matrix whose self-hits are at −∞ (`SearchSides.matrix`)."""
    own = matrix[pairs[0], pairs[1]]
    ranks = (matrix[pairs[0]] > own[:, None]).sum(axis=1) + 1
    return _Ranking(ranks, top_k_rows(matrix, k), lambda: blocks(matrix))


def _natural(
    ranking: _Ranking,
    lengths: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray],
    relevant: list[set[int]],
    exclude: list[int],
    window: int,
    config: RetrievalAuditConfig,
) -> Natural:
    """Rank against length, the top-k lengths against the corpus, and score against length among non-relevant."""
    (_pair_q, pair_d), k, seed = pairs, config.top_k, config.seed
    ranks = ranking.ranks
    pair_lengths = lengths[pair_d]
    bins = LengthBins(width=config.bin_width, max_content=window)

    def by_rank(mask: np.ndarray) -> dict[str, float | None]:
        chosen = ranks[mask]
        return {
            "mean_rank": float(chosen.mean()),
            "median_rank": float(np.median(chosen)),
            "recall": float(np.mean(chosen <= k)),
            "mrr": float(np.mean(1.0 / chosen)),
        }

    rows = per_bin(bins, bins.assign(pair_lengths), by_rank)
    for row, count in zip(rows, np.bincount(bins.assign(lengths), minlength=len(rows)).tolist(), strict=True):
        row["corpus_count"] = count
    retrieved = lengths[ranking.top_k]  # (Q, k)
    retrieved_mean, retrieved_ci = mean_ci(length_percentiles(lengths, retrieved).mean(axis=1), seed=seed)
    relevant_mean, relevant_ci = mean_ci(length_percentiles(lengths, pair_lengths), seed=seed)
    edges = np.linspace(0, max(float(np.percentile(lengths, 99)), window + 1), 31)
    histogram = {"edges": edges.tolist()}
    for name, values in (("corpus", lengths), ("relevant", pair_lengths), ("retrieved", retrieved.ravel())):
        histogram[name] = np.histogram(np.minimum(values, edges[-1]), edges)[0].tolist()
    rng = np.random.default_rng(seed)

    def groups():
        start = 0
        for block in ranking.blocks():
            for row, query in enumerate(range(start, start + block.shape[0])):
                keep = np.ones(block.shape[1], dtype=bool)
                keep[list(relevant[query])] = False
                if exclude[query] >= 0:
                    keep[exclude[query]] = False
                index = np.flatnonzero(keep)
                if config.max_negatives is not None and len(index) > config.max_negatives:
                    index = np.sort(rng.choice(index, config.max_negatives, replace=False))
                yield block[row, index], lengths[index]
            start += block.shape[0]

    pooled, per_query = partial_spearman(groups())
    per_query_mean, per_query_ci = mean_ci(per_query, seed=seed)
    return Natural(
        rank_vs_length={
            "correlation": spearman(pair_lengths, ranks),
            "by_bin": rows,
            "bins": bins.describe(),
            "pairs": {"length": pair_lengths.tolist(), "rank": ranks.tolist()},
        },
        top_k_lengths={
            "corpus": _length_summary(lengths),
            "relevant": _length_summary(pair_lengths),
            "retrieved": _length_summary(retrieved.ravel()),
            "retrieved_percentile": {"mean": retrieved_mean, "ci95": retrieved_ci},
            "relevant_percentile": {"mean": relevant_mean, "ci95": relevant_ci},
            "ks_vs_corpus": two_sample_ks(retrieved.ravel(), lengths),
            "ks_vs_relevant": two_sample_ks(retrieved.ravel(), pair_lengths),
            "histogram": histogram,
        },
        score_length={
            "partial_rho": pooled,
            "per_query_mean": per_query_mean,
            "per_query_ci95": per_query_ci,
            "wilcoxon_p": wilcoxon_p(per_query),
            "n_queries": len(per_query),
        },
    )


def _judged(data: RetrievalSplit, drop_self_hits: bool) -> tuple[list[set[int]], list[int], np.ndarray]:
    """Relevant corpus rows per query, each query's self-hit row (-1: none), and the (2, P) relevant pairs."""
    doc_position = {doc_id: row for row, doc_id in enumerate(data.doc_ids)}
    exclude = [doc_position.get(qid, -1) if drop_self_hits else -1 for qid in data.query_ids]
    relevant = [
        {doc_position[doc] for doc, grade in data.qrels.get(qid, {}).items() if grade > 0 and doc in doc_position}
        for qid in data.query_ids
    ]
    pairs = np.asarray([(q, d) for q, docs in enumerate(relevant) for d in sorted(docs)], dtype=np.int64)
    if not len(pairs):
        source = data.describe().get("source")
        raise DataFormatError(None, None, f"{source}: no query has a relevant document in the corpus")
    return relevant, exclude, pairs.reshape(-1, 2).T


def audit_retrieval(
    encoder: TextEncoder,
    data: RetrievalSplit,
    view: TokenView,
    config: RetrievalAuditConfig = RetrievalAuditConfig(),
    *,
    encoder_note: str | None = None,
    on_progress: Progress | None = None,
    lexical: LexicalScorer | None = None,
) -> RetrievalBias:
    """Measure natural and controlled length bias of `encoder` on a BEIR split (``audit.json`` →
    ``retrieval_bias``). `view` supplies the tokenizer and, unless `config.window` is set, the window;
    `encoder_note` says what the encoder is (recorded in the settings; default: its class name).

    The corpus and the queries are embedded once; the controlled part embeds only perturbed documents. Each of
    ``config.searches`` besides dense (lexical, hybrid; `lexical` scores the lexical side) is audited on the same
    pairs and perturbed texts (`lengthwise.audit.retrieval.sides`) into ``by_search``.
    Raises DataFormatError when no query has a relevant document in the corpus, SettingError when a lexical or
    hybrid search is asked for without a lexical scorer.
    """
    progress = on_progress or (lambda stage, done, total: None)
    searches = config.lexical_searches
    if searches and lexical is None:
        raise SettingError("searches", list(config.searches), "lexical and hybrid need a lexical scorer (BM25)")
    started = time.perf_counter()
    window = config.window or view.max_content
    relevant, exclude, pairs = _judged(data, config.drop_self_hits)
    lengths = token_lengths(view, data.doc_texts)
    corpus = embed_side(encoder.encode_documents, data.doc_texts, "embedding corpus", config.batch_size, progress)
    queries = embed_side(encoder.encode_queries, data.query_texts, "embedding queries", config.batch_size, progress)
    embedded = time.perf_counter()
    progress("natural bias", 0, 1)
    judged = (pairs[0], pairs[1])
    natural = _natural(_dense_ranking(queries, corpus, judged, exclude, config.top_k), lengths, judged, relevant,
                       exclude, window, config)  # fmt: skip
    sides, natural_by = None, {}
    if searches and lexical is not None:
        progress("lexical scores", 0, 1)
        sides = SearchSides.build(queries, corpus, lexical, data.query_texts, exclude, config.lexical_weight)
        progress("lexical scores", 1, 1)
        for search in searches:
            ranking = _matrix_ranking(sides.matrix(search), judged, config.top_k)
            natural_by[search] = _natural(ranking, lengths, judged, relevant, exclude, window, config)
    measured = time.perf_counter()
    chosen = np.arange(pairs.shape[1])
    if config.max_pairs is not None and len(chosen) > config.max_pairs:
        chosen = np.sort(np.random.default_rng(config.seed).choice(chosen, config.max_pairs, replace=False))
    controlled, cost, controlled_by = controlled_bias(
        encoder, view, data, (queries, corpus), (pairs[0][chosen], pairs[1][chosen]),
        relevant, exclude, window, config, progress, sides, searches,
    )  # fmt: skip
    controlled["pairs_available"] = int(pairs.shape[1])
    settings = {**asdict(config), "window": window, "position_length": config.position_length or window}
    settings["encoder"] = encoder_note or type(encoder).__name__
    section = RetrievalBias(
        settings=settings,
        data=dict(data.describe()),
        window=window,
        top_k=config.top_k,
        natural=natural,
        controlled=controlled,
        verdicts=[],
        cost={
            "corpus_embedded": len(data.doc_texts),
            "queries_embedded": len(data.query_texts),
            **cost,
            "seconds": {
                "embed_corpus_and_queries": round(embedded - started, 3),
                "natural": round(measured - embedded, 3),
                "controlled": round(time.perf_counter() - measured, 3),
            },
        },
    )
    section["verdicts"] = verdicts(section, config.alpha)
    if sides is not None and lexical is not None:
        section["by_search"] = {}
        for search in searches:
            controlled_by[search]["pairs_available"] = int(pairs.shape[1])
            natural_part, controlled_part = natural_by[search], controlled_by[search]
            how: dict[str, Any] = {"lexical": lexical.describe()}
            if search == "hybrid":
                how |= {"fusion": "convex", "lexical_weight": config.lexical_weight}
            part = {"natural": natural_part, "controlled": controlled_part, "top_k": config.top_k}
            section["by_search"][search] = SearchBias(
                search=search, settings=how, natural=natural_part, controlled=controlled_part,
                verdicts=verdicts(part, config.alpha),
            )  # fmt: skip
    return section
