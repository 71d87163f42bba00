"""An index's search mode and fusion tuned on queries with judgements (`lengthwise index tune`,
`LongIndex.tune_fusion`): every arm ranked by the index's `Searcher`, the best recorded in its lexical side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import TUNED_WEIGHTS, Fusion, Mode
from lengthwise.search.types import FusionSettings

if TYPE_CHECKING:
    from lengthwise.search.lexical.bm25 import BothGranularities, LexicalIndex
    from lengthwise.search.searcher import Searcher

__all__ = ["tune_fusion"]

Rankings = list[list[tuple[str, float]]]


def tune_fusion(
    searcher: Searcher,
    lexical: LexicalIndex | BothGranularities | None,
    name: str,
    texts: list[str],
    score: Callable[[Rankings], float],
    *,
    weights: Sequence[float] = TUNED_WEIGHTS,
    on_eval: Callable[[str, float], None] | None = None,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`LongIndex.tune_fusion` (see it): every arm ranked by `searcher`, the best chosen, recorded in `lexical` (the
    index `name`'s lexical side) when `record` is given."""
    if lexical is None:
        raise SettingError("index", name, "holds no text to tune a fusion on; build it again with "
                           "the corpus")  # fmt: skip
    _check_weights(weights)
    vectors = searcher.queries.embed(texts)
    arms = _arms(weights)
    scores = {}
    for name, (mode, fusion) in arms.items():
        found = searcher.rank(vectors, texts, 10, mode, fusion)
        scores[name] = score([[(hit.id, hit.score) for hit in hits] for hits in found])
        if on_eval is not None:
            on_eval(name, scores[name])
    best = max(arms, key=lambda name: (scores[name], -list(arms).index(name)))
    if arms[best][0] is Mode.HYBRID and scores[best] <= max(scores["dense"], scores["lexical"]):
        best = "dense" if scores["dense"] >= scores["lexical"] else "lexical"
    mode, fusion = arms[best]
    if record is not None:
        lexical.record(mode=mode.value, fusion=fusion.to_dict(), tuned=record)
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
    arms: dict[str, tuple[Mode, FusionSettings]] = {"dense": (Mode.DENSE, FusionSettings()),
                                                    "lexical": (Mode.LEXICAL, FusionSettings()),
                                                    "rrf": (Mode.HYBRID, FusionSettings(Fusion.RRF))}  # fmt: skip
    arms.update({f"convex-{w:g}": (Mode.HYBRID, FusionSettings(Fusion.CONVEX, float(w))) for w in weights})
    arms.update({f"zscore-{w:g}": (Mode.HYBRID, FusionSettings(Fusion.ZSCORE, float(w))) for w in weights})
    return arms
