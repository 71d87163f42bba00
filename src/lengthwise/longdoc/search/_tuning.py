"""The local index checked against its own exact scan, and its fusion tuned on queries with judgements
(`lengthwise eval --index`, `lengthwise index tune`; `LongIndex.ranked_with_exact`, `LongIndex.tune_fusion`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import TUNED_WEIGHTS

if TYPE_CHECKING:
    from lengthwise.longdoc.search._dense import LocalWindows
    from lengthwise.longdoc.search._document_search import DocumentSearch
    from lengthwise.longdoc.search.hybrid import FusionSettings, Mode

__all__ = ["ranked_with_exact", "tune_fusion"]

Rankings = list[list[tuple[str, float]]]


def ranked_with_exact(index: DocumentSearch, texts: list[str], k: int, mode: Mode) -> dict[str, Rankings]:
    """(id, score) rankings of the `k` best documents per query: ``index`` through the index in `mode` (as
    `search` with generous candidates), ``exact`` by the same mode's exact scan of every document."""
    from lengthwise.longdoc.search.hybrid import HybridSearch, Mode

    vectors = None if mode is Mode.LEXICAL else np.asarray(index.embed_queries(texts), dtype=np.float32)
    candidates = max(index.default_candidates(), 10 * k)
    if mode is Mode.DENSE:
        assert vectors is not None
        return {"index": index.search_vectors(vectors, k, scoring=index.scoring, candidates=candidates),
                "exact": index.exact_vectors(vectors, k, scoring=index.scoring)}  # fmt: skip
    searcher = HybridSearch(index, index.lexical, index.scoring, index.fusion)
    found = searcher.search(vectors, texts, k, mode, candidates=candidates)
    exact = [searcher.exact_ranked(None if vectors is None else vectors[n], text, k, mode)
             for n, text in enumerate(texts)]  # fmt: skip
    return {"index": [[(hit.id, hit.score) for hit in row] for row in found], "exact": exact}


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
