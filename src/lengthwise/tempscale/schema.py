"""The typed shape of ``OUT/tune.json`` (``lengthwise tempscale tune``): provenance plus the tuning curve."""

from __future__ import annotations

from typing import TypedDict

from lengthwise.core.results import Provenance

__all__ = ["CurvePoint", "TuneRecord", "TuneSummary"]


class CurvePoint(TypedDict):
    t: float
    score: float
    source: str  # "grid", "search" or "baseline" (t = 1)


class TuneSummary(TypedDict):
    """`TuneResult.to_dict()`: the best t, its score, the t = 1 score and every evaluated point in t order."""

    side: str  # both, query or document
    best_t: float
    best_score: float
    baseline_score: float
    gain: float
    curve: list[CurvePoint]


class TuneRecord(Provenance):
    """``tune.json``. From `Provenance`: ``model`` (fingerprint), ``data`` (the dev data's description),
    ``settings`` (grid, search, bounds, xatol, max_evals, side, split, batch_size, max_items, seed), ``created``,
    ``wall_time_s`` and ``environment``."""

    task: str  # sts, retrieval or classification
    metric: str  # spearman, ndcg@10 or accuracy
    result: TuneSummary
