"""Choosing a long-document strategy, window and stride on a dev split: every candidate scored, the best kept.

Like `lengthwise.tempscale.tune`, the tuner knows nothing about tasks: it maximises any
``objective(config) -> float`` (retrieval nDCG@10 on a BEIR dev split, or the mean Acc@1 of a synthetic task),
which the command line builds. Truncation at the model's own window is always scored, as the baseline.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.longdoc.config import LongDocConfig, LongDocError, Strategy

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["LongTuneResult", "candidates", "plot_long_tune", "tune_long"]

Objective = Callable[[LongDocConfig], float]


def candidates(
    strategies: Sequence[Strategy | str],
    windows: Sequence[int | None],
    overlaps: Sequence[float] = (0.0,),
    *,
    top_k: int | Sequence[int] = 1,
    scales: Sequence[Sequence[int]] = ((),),
    fuse_means: Sequence[float] = (0.0,),
) -> list[LongDocConfig]:
    """Every (strategy, window, overlap) combination as configs; overlap 0.5 gives stride = window / 2.

    Multi-vector candidates are further crossed with each `top_k`, each set of extra `scales` (``()`` = one
    size) and each `fuse_means` weight; the other strategies keep one vector per document and ignore them.
    Truncation ignores the stride, so it appears once per window. Raises `LongDocError` for an overlap outside
    [0, 1) (it names the ``overlaps`` field).
    """
    if any(not 0 <= overlap < 1 for overlap in overlaps):
        raise LongDocError("each overlap must be in [0, 1), e.g. 0,0.5", field="overlaps", value=list(overlaps))
    ks = [top_k] if isinstance(top_k, int) else list(top_k)
    configs: list[LongDocConfig] = []
    for strategy, window, overlap in itertools.product(strategies, windows, overlaps):
        strategy = Strategy.parse(strategy)
        if strategy is Strategy.truncate and overlap:
            continue
        stride = None if not overlap or window is None else max(1, round(window * (1 - overlap)))
        if strategy is not Strategy.multi_vector:
            configs.append(LongDocConfig(strategy=strategy, window=window, stride=stride))
            continue
        for k, extra, fuse in itertools.product(ks, scales, fuse_means):
            extra = tuple(scale for scale in extra if scale != window)
            configs.append(
                LongDocConfig(strategy=strategy, window=window, stride=stride, top_k=k, scales=extra, fuse_mean=fuse)
            )
    return list(dict.fromkeys(configs))


@dataclass(frozen=True)
class LongTuneResult:
    """Each candidate with its score (in evaluation order), the best one and the truncation baseline."""

    scores: tuple[tuple[LongDocConfig, float], ...]
    best: LongDocConfig
    best_score: float
    baseline: LongDocConfig
    baseline_score: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "best": self.best.to_dict(),
            "best_label": self.best.describe(),
            "best_score": self.best_score,
            "baseline": self.baseline.to_dict(),
            "baseline_score": self.baseline_score,
            "gain": self.best_score - self.baseline_score,
            "candidates": [{"config": c.to_dict(), "label": c.describe(), "score": s} for c, s in self.scores],
        }


def tune_long(
    objective: Objective,
    configs: Sequence[LongDocConfig],
    *,
    on_eval: Callable[[LongDocConfig, float], None] | None = None,
) -> LongTuneResult:
    """Score the truncation baseline and every config once; the best (first on ties) wins."""
    baseline = LongDocConfig(strategy=Strategy.truncate)
    scores: dict[LongDocConfig, float] = {}
    for config in [baseline, *configs]:
        if config in scores:
            continue
        value = float(objective(config))
        if not np.isfinite(value):
            raise LongDocError(f"the objective returned {value} for {config.describe()}; check the dev data")
        scores[config] = value
        if on_eval is not None:
            on_eval(config, value)
    best = max(scores, key=lambda c: scores[c])
    return LongTuneResult(tuple(scores.items()), best, scores[best], baseline, scores[baseline])


def plot_long_tune(result: LongTuneResult, metric: str) -> Figure:
    """A horizontal bar per candidate, the best in red, the truncation baseline as a dotted line."""
    from matplotlib.figure import Figure

    labels = [config.describe() for config, _ in result.scores]
    values = [score for _, score in result.scores]
    figure = Figure(figsize=(6.4, 0.35 * len(labels) + 1.2), layout="constrained")
    axes = figure.add_subplot()
    colors = ["tab:red" if config == result.best else "tab:blue" for config, _ in result.scores]
    axes.barh(range(len(labels)), values, color=colors)
    axes.set_yticks(range(len(labels)), labels, fontsize=8)
    axes.invert_yaxis()
    axes.axvline(result.baseline_score, color="0.3", linestyle=":", linewidth=1)
    axes.set_xlabel(metric)
    axes.set_title(f"long documents: {metric} per candidate (best: {result.best.describe()})", fontsize=9)
    return figure
