"""An index's search mode and fusion tuned on queries with judgements (`lengthwise index tune`,
`LongIndex.tune_fusion`): every arm ranked by the index's `Searcher`, the best recorded in its lexical side."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lengthwise.core.errors import SettingError
from lengthwise.core.forwards import shared_forwards
from lengthwise.core.fusion import TUNED_WEIGHTS, Fusion, Mode
from lengthwise.search.types import FusionSettings, Hit

if TYPE_CHECKING:
    from lengthwise.search.lexical.bm25 import BothGranularities, LexicalIndex
    from lengthwise.search.searcher import Searcher

__all__ = ["TUNED_TOKEN_WEIGHTS", "tune_fusion"]

TUNED_TOKEN_WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6)  # the token side's weights `index tune --tokens` tries

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
    record: Mapping[str, object] | None = None,
    token_weights: Sequence[float] = TUNED_TOKEN_WEIGHTS,
) -> dict[str, Any]:
    """`LongIndex.tune_fusion` (see it): every arm ranked by `searcher`, the best chosen, recorded in `lexical` (the
    index `name`'s lexical side) when `record` is given. With the searcher's token stage on (`use_tokens`), the best
    fusion is also rescored by it at each of `token_weights`; the best of those is chosen where it beats every plain
    arm, and its weight recorded (``tokens``: what `use_tokens` then takes by default; None otherwise)."""
    if lexical is None:
        raise SettingError("index", name, "holds no text to tune a fusion on; build it again with "
                           "the corpus")  # fmt: skip
    _check_weights(weights)
    stage, searcher.tokens = searcher.tokens, None  # the plain arms first, without the token stage
    try:
        with shared_forwards():  # the queries read once for their vectors and, with a stage, their tokens
            vectors = searcher.queries.embed(texts)
            tokens = list(stage.encode(texts)) if stage is not None else None
        arms, scores = _arms(weights), {}
        for name, (mode, fusion) in arms.items():
            scores[name] = _scored(name, searcher.rank(vectors, texts, 10, mode, fusion), score, on_eval)
        hybrid = max((name for name in arms if arms[name][0] is Mode.HYBRID),
                     key=lambda name: (scores[name], -list(arms).index(name)))  # fmt: skip
        rescored = {}  # the best fusion rescored by the token side at each weight
        for weight in token_weights:
            if stage is None:
                break
            searcher.tokens = replace(stage, weight=float(weight))
            found = searcher.rank(vectors, texts, 10, Mode.HYBRID, arms[hybrid][1], tokens=tokens)
            name = f"{hybrid}+tokens-{weight:g}"
            rescored[float(weight)] = scores[name] = _scored(name, found, score, on_eval)
    finally:
        searcher.tokens = stage
    best = max(arms, key=lambda name: (scores[name], -list(arms).index(name)))
    if arms[best][0] is Mode.HYBRID and scores[best] <= max(scores["dense"], scores["lexical"]):
        best = "dense" if scores["dense"] >= scores["lexical"] else "lexical"
    mode, fusion = arms[best]
    chosen = None  # the token weight, where rescoring the best fusion beats every plain arm
    if rescored and max(rescored.values()) > scores[best]:
        mode, fusion = arms[hybrid]
        chosen = {"weight": max(rescored, key=lambda w: (rescored[w], -w))}
    tuned_tokens = {"tokens": chosen} if stage is not None else {}
    if record is not None:  # a tuning without the stage drops the token weight an earlier one recorded
        lexical.record(mode=mode.value, fusion=fusion.to_dict(), tuned=record,
                       **(tuned_tokens or ({"tokens": None} if "tokens" in lexical.settings else {})))  # fmt: skip
    return {"scores": scores, "mode": mode.value, "fusion": fusion.to_dict(), **tuned_tokens}


def _scored(name: str, found: list[list[Hit]], score: Callable[[Rankings], float],
            on_eval: Callable[[str, float], None] | None) -> float:  # fmt: skip
    """One arm's rankings rated by `score` (and said to `on_eval`)."""
    rated = score([[(hit.id, hit.score) for hit in hits] for hits in found])
    if on_eval is not None:
        on_eval(name, rated)
    return rated


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
