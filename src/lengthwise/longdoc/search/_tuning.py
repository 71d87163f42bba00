"""The local index's fusion tuned on queries with judgements (`lengthwise index tune`, `LongIndex.tune_fusion`); its
check against the exact scan is every backend's (`DocumentSearch.ranked_with_exact`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import TUNED_WEIGHTS

if TYPE_CHECKING:
    from lengthwise.longdoc.search._dense import LocalWindows
    from lengthwise.longdoc.search.hybrid import FusionSettings, Mode

__all__ = ["tune_fusion"]

Rankings = list[list[tuple[str, float]]]


def tune_fusion(
    index: LocalWindows,
    texts: list[str],
    score: Callable[[Rankings], float],
    *,
    weights: Sequence[float] = TUNED_WEIGHTS,
    on_eval: Callable[[str, float], None] | None = None,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`LongIndex.tune_fusion` (see it): every arm searched, the best chosen, recorded when `record` is given."""
    from lengthwise.longdoc.search.hybrid import HybridSearch, Mode

    if index.lexical is None:
        raise SettingError("index", str(index.folder), "holds no text to tune a fusion on; build it again with "
                           "the corpus")  # fmt: skip
    _check_weights(weights)
    vectors = index.embed_queries(texts)
    arms = _arms(weights)
    scores = {}
    for name, (mode, fusion) in arms.items():
        found = HybridSearch(index, index.lexical, index.scoring, fusion).search(vectors, texts, 10, mode)
        scores[name] = score([[(hit.id, hit.score) for hit in hits] for hits in found])
        if on_eval is not None:
            on_eval(name, scores[name])
    best = max(arms, key=lambda name: (scores[name], -list(arms).index(name)))
    if arms[best][0] is Mode.HYBRID and scores[best] <= max(scores["dense"], scores["lexical"]):
        best = "dense" if scores["dense"] >= scores["lexical"] else "lexical"
    mode, fusion = arms[best]
    if record is not None:
        index.lexical.record(mode=mode.value, fusion=fusion.to_dict(), tuned=record)
    return {"scores": scores, "mode": mode.value, "fusion": fusion.to_dict()}


def _check_weights(weights: Sequence[float]) -> None:
    """A `SettingError` on ``weights`` unless it holds one or more lexical weights, each in [0, 1]."""
    if not weights:
        raise SettingError("weights", list(weights), "no lexical weight to try; give one or more in [0, 1], e.g. "
                           "0.3,0.5")  # fmt: skip
    for weight in weights:
        if not 0 <= weight <= 1:  # NaN too
            raise SettingError("weights", list(weights), f"{weight:g} is not a lexical weight; give weights in [0, 1]")


def _arms(weights: Sequence[float]) -> dict[str, tuple[Mode, FusionSettings]]:
    """The arms of a tuning, in their tie order: dense, lexical, RRF, then convex and z-score fusion at each
    weight (the lower weight first)."""
    from lengthwise.longdoc.search.hybrid import Fusion, FusionSettings, Mode

    arms: dict[str, tuple[Mode, FusionSettings]] = {"dense": (Mode.DENSE, FusionSettings()),
                                                    "lexical": (Mode.LEXICAL, FusionSettings()),
                                                    "rrf": (Mode.HYBRID, FusionSettings(Fusion.RRF))}  # fmt: skip
    arms.update({f"convex-{w:g}": (Mode.HYBRID, FusionSettings(Fusion.CONVEX, float(w))) for w in weights})
    arms.update({f"zscore-{w:g}": (Mode.HYBRID, FusionSettings(Fusion.ZSCORE, float(w))) for w in weights})
    return arms
