"""The fusion rules of a hybrid search, one table from rule name to function (`RULES`), and the exact fused scan
that checks them.

The two sides find different documents: windows find paraphrases and meaning, BM25 finds names, numbers and rare
terms. Each side proposes its `depth` best documents; every proposed document is then scored *exactly* on both
sides (its dense score over all its windows in fp32, its BM25 score from the matrix), and the two are fused:

- ``convex``: ``(1 - w) · dense' + w · lexical'``, each side normalised by its theoretical minimum and the
  query's best score (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023,
  arXiv:2210.11934, "TMM": cosine from −1, BM25 from 0). Bruch et al. found a tuned convex combination better than
  RRF and insensitive to its normaliser; the weight `w` is tuned on a dev split and recorded in the index.
- ``rrf``: reciprocal rank fusion, ``Σ 1 / (60 + rank)`` (Cormack, Clarke & Büttcher, SIGIR 2009).
- ``zscore`` (the default, at w = 0.3), ``minmax``, ``dbsf``: ``(1 - w) · dense' + w · lexical'`` with
  each side rescaled by its own scores over the query's proposed documents (z-score; min to max; Qdrant's
  distribution-based mean ± 3σ, clipped);
  ``adaptive``: ``zscore`` with the weights set per query from each side's spread (`lengthwise.core.fusion`).

Because convex's normalisers use only the query's best score on each side (which the proposals always hold), a
convex score does not depend on which other documents were proposed: the fused top-k equals an exact fused scan of
every document whenever each of its documents is among either side's proposals (`exact_fused` checks it). The
rules normalised over the candidates (and RRF's ranks) depend on the proposals: their exact scan (`fuse_exact`)
fuses the union of each side's exact `depth` best documents, as the search fuses the union of its proposals.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lengthwise.core.fusion import Fusion, convex_fuse, fuse_normalised
from lengthwise.search.rows import best_rows
from lengthwise.search.types import FusionSettings

__all__ = ["CANDIDATE_FUSIONS", "RULES", "exact_candidates", "fuse", "fuse_exact", "top", "top_set"]

RRF_K = 60  # Cormack et al.'s constant
CANDIDATE_FUSIONS = (Fusion.RRF, Fusion.ZSCORE, Fusion.MINMAX, Fusion.DBSF, Fusion.ADAPTIVE)  # depend on proposals

# A rule: (dense scores (n,), each BM25 side's scores [(n,), …], the lexical weight) → fused scores (n,)
Rule = Callable[[np.ndarray, list[np.ndarray], float], np.ndarray]


def _convex(dense: np.ndarray, sides: list[np.ndarray], weight: float) -> np.ndarray:
    """(1 − w) · dense' + Σ (w / s) · side': the mean of each side's convex fusion."""
    return np.mean([convex_fuse(dense, side, weight) for side in sides], axis=0)


def _rrf(dense: np.ndarray, sides: list[np.ndarray], weight: float) -> np.ndarray:
    """Σ 1 / (60 + rank) over the sides (ranks within the given documents); the weight is not used."""
    return sum((_rrf_ranks(side, zero_last=True) for side in sides), _rrf_ranks(dense))


def _adaptive(dense: np.ndarray, sides: list[np.ndarray], weight: float) -> np.ndarray:
    """zscore with each side's weight set per query from its spread (`lengthwise.core.fusion.spread_weights`)."""
    return fuse_normalised([dense, *sides], None, "zscore")


def _normalised(how: str) -> Rule:
    """(1 − w) · dense' + Σ (w / s) · side', each side rescaled by its own scores over the given documents (`how`)."""

    def rule(dense: np.ndarray, sides: list[np.ndarray], weight: float) -> np.ndarray:
        share = weight / len(sides)
        return fuse_normalised([dense, *sides], [1.0 - weight] + [share] * len(sides), how)

    return rule


RULES: dict[Fusion, Rule] = {
    Fusion.CONVEX: _convex,
    Fusion.RRF: _rrf,
    Fusion.ZSCORE: _normalised("zscore"),
    Fusion.MINMAX: _normalised("minmax"),
    Fusion.DBSF: _normalised("dbsf"),
    Fusion.ADAPTIVE: _adaptive,
}


def fuse(dense: np.ndarray, lexical: np.ndarray, settings: FusionSettings) -> np.ndarray:
    """Fused scores of documents from their exact dense and lexical scores (same order: one query's proposed
    documents), by the rule `settings` names (`RULES`). `lexical`: (n,) one BM25 side, or (s, n) several (both
    granularities), which share the lexical weight equally.

    Convex: each side from its theoretical minimum (cosine −1, BM25 0) to the query's best score (`dense.max()`,
    `lexical.max()`: the proposals always hold each side's best document). RRF: ranks within the given documents.
    zscore, minmax, dbsf: each side rescaled by its scores over the given documents; adaptive: zscore weighted per
    query by each side's spread (`lengthwise.core.fusion`).
    """
    return RULES[settings.fusion](dense, list(np.atleast_2d(lexical)), settings.weight)


def exact_candidates(dense: np.ndarray, lexical: np.ndarray, depth: int) -> np.ndarray:
    """The documents a search with exact proposals fuses: the union of each side's `depth` best (sorted numbers;
    `lexical`: one side's scores, or several rows)."""
    return np.union1d(top(dense, depth), np.concatenate([top(side, depth) for side in np.atleast_2d(lexical)]))


def fuse_exact(dense: np.ndarray, lexical: np.ndarray, settings: FusionSettings, depth: int) -> np.ndarray:
    """Fused scores of every document from its exact scores on both sides, as a search whose proposals were exact
    would rank them: convex fuses every document (its score does not depend on the others); the other rules fuse
    `exact_candidates` and leave every other document at −inf."""
    if settings.fusion not in CANDIDATE_FUSIONS:
        return fuse(dense, lexical, settings)
    chosen = exact_candidates(dense, lexical, depth)
    out = np.full(len(dense), -np.inf)
    out[chosen] = fuse(dense[chosen], np.atleast_2d(lexical)[:, chosen], settings)
    return out


def _rrf_ranks(scores: np.ndarray, *, zero_last: bool = False) -> np.ndarray:
    """1 / (60 + rank) of each score (rank 1 = best; ties broken by order); a BM25 score of 0 (no query term)
    contributes nothing."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.arange(1, len(scores) + 1)
    out = 1.0 / (RRF_K + ranks)
    return np.where(scores > 0, out, 0.0) if zero_last else out


def top(scores: np.ndarray, count: int) -> np.ndarray:
    """The indices of the `count` highest scores, best first (stable)."""
    if count >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, count)[:count]
    return part[np.argsort(-scores[part], kind="stable")]


def top_set(scores: np.ndarray, count: int) -> np.ndarray:
    """The indices of the `count` highest scores, ascending: the set ``argsort(-scores, stable)[:count]`` holds
    (ties at the edge: the earlier index), by one partition (`lengthwise.search.rows.best_rows` of one document)."""
    return best_rows(np.asarray(scores), np.asarray([0, len(scores)]), np.zeros(1, dtype=np.int64), count)[0]
