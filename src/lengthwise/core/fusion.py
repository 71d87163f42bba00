"""Fusion of a dense and a lexical score (the hall's copy of the rules both rooms use): pure functions of one query's
scores.

Convex (`convex_fuse`): each side is normalised from its theoretical minimum (cosine −1, BM25 0) to the query's
best score on that side, then ``(1 - w) · dense' + w · lexical'`` (Bruch, Gai & Ingber, "An Analysis of Fusion
Functions for Hybrid Retrieval", ACM TOIS 2023, arXiv:2210.11934, "TMM"). The hybrid search
(`lengthwise.search.fusion`) ranks with it or with the rules below, and the retrieval length-bias audit
(`lengthwise.audit.retrieval`) audits it.

Normalised from the query's candidates (`normalised`, `fuse_normalised`): each side's scores over the documents
proposed for the query are rescaled by their own distribution there, then summed with weights. ``zscore``:
``(s − mean) / σ``; ``minmax``: ``(s − min) / (max − min)``; ``dbsf``: distribution-based score fusion as Qdrant
describes it, ``(s − (mean − 3σ)) / 6σ`` with the sample σ, clipped to [0, 1] (Qdrant's own code, `distr_norm`,
leaves it unclipped, which ranks exactly as ``zscore``: the clip at ±3σ is what makes it differ). ``adaptive``
(`spread_weights`) is ``zscore`` with each side's weight set per query from its own score distribution: the
z-score of its best candidate, ``(max − mean) / σ``, so a side whose best document stands far out of its crowd
(an exact name or number BM25 matched) weighs more on that query. None of these needs labels; unlike convex, they
depend on which documents are candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING

from lengthwise.core.errors import SettingError

if TYPE_CHECKING:  # numpy loads when fusing, so that config modules can import the default weight cheaply
    import numpy as np

__all__ = [
    "DEFAULT_FUSION",
    "FUSION",
    "FUSION_WEIGHT",
    "LEXICAL_GRANULARITY",
    "LEXICAL_WEIGHT",
    "NORMALISERS",
    "TUNED_WEIGHTS",
    "Fusion",
    "Mode",
    "convex_fuse",
    "fuse_normalised",
    "normalised",
    "spread_weights",
]

# What BM25 ranks, chosen on dev sets only by the rule docs/longdoc.md wrote before the results (python -m
# benchmarks.search.hybrid quality). First run (4 / 5 passkey and needle documents per length): BM25 over whole
# documents.
# Second run (20 per length): BM25 over the index's windows (a document scores its best window). Since issue 49's
# sixth corpus (20 Newsgroups replies, where BM25 leads) and the index serving both granularities: both, each with
# half the lexical weight.
LEXICAL_GRANULARITY = "both"
# Convex fusion's default lexical weight: the hybrid default of sessions 39–48 (the second run's choice), and the
# weight the retrieval audit's convex fusion takes by default.
LEXICAL_WEIGHT = 0.1
# The hybrid default since issue 49: z-scores of each side over the query's candidates at lexical weight 0.3, the one
# arm within 1 point of the best on the dev split of each of five corpora (QMSum, SciFact, 20 Newsgroups subjects,
# realistic passkey and needle; the leave-one-corpus-out rule of docs/longdoc.md). An index built with text records
# it (``DEFAULT_FUSION``, in its lexical side's settings); `index tune` records its own choice over it.
FUSION = "zscore"
FUSION_WEIGHT = 0.3
DEFAULT_FUSION = {"fusion": FUSION, "weight": FUSION_WEIGHT}
TUNED_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the lexical weights `index tune` tries by default


class Mode(str, Enum):
    """Which evidence ranks the documents: the search modes of an index and of the retrieval audit."""

    DENSE = "dense"  # the window vectors (ANN candidates, exact rescoring); the encoder's cosines in the audit
    LEXICAL = "lexical"  # BM25 over the documents' text
    HYBRID = "hybrid"  # both, fused


class Fusion(str, Enum):
    """How a hybrid search combines the two sides (the rules below; `lengthwise.search.fusion` applies them)."""

    CONVEX = "convex"
    RRF = "rrf"
    ZSCORE = "zscore"
    MINMAX = "minmax"
    DBSF = "dbsf"
    ADAPTIVE = "adaptive"


def convex_fuse(
    dense: np.ndarray,
    lexical: np.ndarray,
    weight: float,
    top_dense: float | np.ndarray | None = None,
    top_lexical: float | np.ndarray | None = None,
) -> np.ndarray:
    """Fused scores of documents from their dense cosines and BM25 scores (same order, any shape).

    `top_dense` / `top_lexical` are the query's best score on each side (default: the maximum of the given
    scores), scalars or arrays that broadcast against the scores (one best per row); a side whose best is at its
    minimum (no positive BM25 score) contributes 0.
    """
    import numpy as np

    if top_dense is None:
        top_dense = float(dense.max()) if dense.size else 1.0
    if top_lexical is None:
        top_lexical = float(lexical.max()) if lexical.size else 0.0
    top_dense, top_lexical = np.asarray(top_dense, dtype=np.float64), np.asarray(top_lexical, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        dense_part = np.where(top_dense > -1.0, (dense + 1.0) / (top_dense + 1.0), 0.0)
        lexical_part = np.where(top_lexical > 0, lexical / np.where(top_lexical > 0, top_lexical, 1.0), 0.0)
    return (1.0 - weight) * dense_part + weight * lexical_part


NORMALISERS = ("zscore", "minmax", "dbsf")  # how `normalised` rescales one side's scores over the candidates


def normalised(scores: np.ndarray, how: str) -> np.ndarray:
    """One side's scores over one query's candidates, rescaled by their own distribution (`how`: one of
    `NORMALISERS`). Scores that are all equal (or fewer than two) carry no order: 0 (zscore, minmax) or 0.5 (dbsf,
    as Qdrant)."""
    import numpy as np

    scores = np.asarray(scores, dtype=np.float64)
    if how not in NORMALISERS:
        raise SettingError("fusion", how, f"not a normaliser; use one of {', '.join(NORMALISERS)}")
    if scores.size < 2 or float(scores.max()) == float(scores.min()):
        return np.full(scores.shape, 0.5 if how == "dbsf" else 0.0)
    if how == "minmax":
        low = float(scores.min())
        return (scores - low) / (float(scores.max()) - low)
    if how == "zscore":
        return (scores - scores.mean()) / scores.std()
    sigma = scores.std(ddof=1)
    return np.clip((scores - (scores.mean() - 3.0 * sigma)) / (6.0 * sigma), 0.0, 1.0)


def spread_weights(sides: Sequence[np.ndarray]) -> np.ndarray:
    """Each side's weight for one query, from its scores over the candidates: the z-score of its best candidate
    (how far its best stands out of the others), divided by their sum. A side whose scores are all equal weighs 0;
    if every side's do, the weights are equal."""
    import numpy as np

    peaks = []
    for scores in sides:
        scores = np.asarray(scores, dtype=np.float64)
        sigma = scores.std() if scores.size > 1 else 0.0
        peaks.append(float((scores.max() - scores.mean()) / sigma) if sigma > 0 else 0.0)
    total = sum(peaks)
    return np.asarray(peaks) / total if total > 0 else np.full(len(peaks), 1.0 / len(peaks))


def fuse_normalised(sides: Sequence[np.ndarray], weights: Sequence[float] | None, how: str) -> np.ndarray:
    """Σ weight · `normalised`(side) over the sides' scores of the same candidates (same order); `weights` None:
    `spread_weights` (the adaptive rule, with ``zscore``)."""
    if weights is None:
        weights = list(spread_weights(sides))
    if len(weights) != len(sides):
        raise SettingError("weight", list(weights), f"{len(weights)} weights for {len(sides)} sides; give one per side")
    parts = [w * normalised(scores, how) for w, scores in zip(weights, sides, strict=True)]
    return sum(parts[1:], parts[0])
