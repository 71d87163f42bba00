"""Choosing a long-document strategy, window and stride on a dev split: every candidate scored, the best kept.

Like `lengthwise.tempscale.tune`, the tuner knows nothing about tasks: it maximises any
``objective(config) -> float``. `tune_model` scores a loaded model's `LongEncoder` under each candidate, through one
window cache, by the mean Acc@1 of a synthetic task (`synthetic_score`, this room's own) or by a score handed over
(retrieval nDCG@10 on a BEIR dev split, from the evaluation room, by `lengthwise.tune_long_documents`), and writes
``tune.json`` and ``tune.png`` as one output set. Truncation at the model's own window is always scored, as the
baseline.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.longdoc.config import LongDocConfig, LongDocError, Strategy

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.encoder import TextEncoder

__all__ = [
    "TUNE_FILES",
    "LongTuneResult",
    "candidates",
    "check_targets",
    "plan_candidates",
    "plot_long_tune",
    "synthetic_score",
    "tune_long",
    "tune_model",
]

TUNE_FILES = ("tune.json", "tune.png")  # what a tuning writes, as one output set

Objective = Callable[[LongDocConfig], float]


def candidates(
    strategies: Sequence[Strategy | str],
    windows: Sequence[int | None],
    overlaps: Sequence[float] = (0.0,),
    *,
    best_windows: int | Sequence[int] = 1,
    scales: Sequence[Sequence[int]] = ((),),
    fuse_means: Sequence[float] = (0.0,),
) -> list[LongDocConfig]:
    """Every (strategy, window, overlap) combination as configs; overlap 0.5 gives stride = window / 2.

    Multi-vector candidates are further crossed with each `best_windows`, each set of extra `scales` (``()`` = one
    size) and each `fuse_means` weight; the other strategies keep one vector per document and ignore them.
    Truncation ignores the stride, so it appears once per window. Raises `LongDocError` for an overlap outside
    [0, 1) (it names the ``overlaps`` field).
    """
    if any(not 0 <= overlap < 1 for overlap in overlaps):
        raise LongDocError("overlaps", list(overlaps), "each overlap must be in [0, 1), e.g. 0,0.5")
    ks = [best_windows] if isinstance(best_windows, int) else list(best_windows)
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
            configs.append(LongDocConfig(strategy=strategy, window=window, stride=stride, best_windows=k, scales=extra,
                                         fuse_mean=fuse))  # fmt: skip
    return list(dict.fromkeys(configs))


def plan_candidates(
    strategies: Sequence[str],
    windows: Sequence[int],
    overlaps: Sequence[float],
    *,
    best_windows: int | Sequence[int] = 1,
    scales: Sequence[Sequence[int]] = ((),),
    fuse_means: Sequence[float] = (0.0,),
) -> tuple[list[LongDocConfig], dict[str, Any]]:
    """(`candidates` of these settings, the settings as a tuning record holds them)."""
    configs = candidates(list(strategies), list(windows), list(overlaps), best_windows=best_windows,
                         scales=scales, fuse_means=fuse_means)  # fmt: skip
    settings = {"strategies": ",".join(strategies), "windows": ",".join(map(str, windows)),
                "overlaps": ",".join(f"{x:g}" for x in overlaps),
                "best_windows": best_windows if isinstance(best_windows, int) else list(best_windows),
                "scales": [list(s) for s in scales], "fuse_means": list(fuse_means)}  # fmt: skip
    return configs, settings


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
            raise LongDocError(
                None, None, f"the objective returned {value} for {config.describe()}; check the dev data"
            )
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


def check_targets(out: str | os.PathLike[str] | None, save: str | os.PathLike[str] | None) -> None:
    """Refuse, before the model loads, an `out` that cannot receive the tuning's output set or a `save` folder that
    cannot receive the model (`SettingError` on ``out`` / ``save``)."""
    from lengthwise.core.output_set import check_model_target, check_output_target

    if out is not None:
        check_output_target(Path(out), TUNE_FILES, what="a long-document tuning", field="out")
    if save is not None:
        check_model_target(Path(save), beside=[Path(out)] if out is not None else [], field="save")


def synthetic_score(
    data: str | os.PathLike[str], batch_size: int = 32
) -> tuple[Callable[[TextEncoder], float], dict[str, Any], str] | None:
    """(the mean Acc@1 of an encoder, the task's description, the metric's name) when `data` is a folder written by
    ``lengthwise longdoc synth``; None for any other folder."""
    from lengthwise.longdoc.tasks.scoring import evaluate_synthetic
    from lengthwise.longdoc.tasks.synthetic import META_FILE, read_synthetic

    if not (Path(data) / META_FILE).is_file():
        return None
    synthetic = read_synthetic(Path(data))

    def accuracy(encoder: TextEncoder) -> float:
        return evaluate_synthetic(encoder, synthetic, batch_size=batch_size).mean

    return accuracy, synthetic.meta, "mean acc@1"


def tune_model(
    model: SentenceTransformer,
    configs: Sequence[LongDocConfig],
    score: Callable[[TextEncoder], float],
    *,
    name: str | os.PathLike[str],
    metric: str,
    data: dict[str, Any],
    settings: dict[str, Any],
    out: str | os.PathLike[str] | None = None,
    save: str | os.PathLike[str] | None = None,
    on_eval: Callable[[LongDocConfig, float], None] | None = None,
    started: float | None = None,
) -> tuple[LongTuneResult, dict[str, Any]]:
    """Score `model`'s `LongEncoder` under the truncation baseline and each of `configs` by `score` (one window cache
    for all: a window pooled or scored another way is embedded once), keep the best, and make the record.

    Args:
        model: The loaded model.
        configs: The candidates (`candidates`).
        score: The dev score of an encoder (higher is better): `synthetic_score`'s, or the evaluation room's.
        name, metric, data, settings: The model's name, what `score` measures, a description of its data and the
            caller's settings, for the record.
        out: Where ``tune.json`` and ``tune.png`` are written as one set (checked by `check_targets` before the
            model loaded); None writes nothing.
        save: Also save the model with the best choice here (`lengthwise.longdoc.persist.save_longdoc`).
        on_eval: Called with (config, score) after each candidate.
        started: `time.perf_counter()` when the job began (default: now).

    Returns:
        The tuning result and the record (``metric``, ``result``, ``provenance``).
    """
    import io
    import time

    from lengthwise.core.models import model_fingerprint
    from lengthwise.core.output_set import write_output_set
    from lengthwise.core.results import json_bytes, provenance
    from lengthwise.longdoc._cache import WindowCache
    from lengthwise.longdoc.encoder import LongEncoder
    from lengthwise.longdoc.persist import save_longdoc

    started = time.perf_counter() if started is None else started
    cache = WindowCache(2**30)
    result = tune_long(lambda config: score(LongEncoder(model, config, cache=cache)), configs, on_eval=on_eval)
    if save is not None:
        save_longdoc(model, result.best, Path(save))
    record = {
        "metric": metric,
        "result": result.to_dict(),
        "provenance": provenance(model_fingerprint(model, name), data, settings, started=started),
    }
    if out is not None:
        figure = io.BytesIO()
        plot_long_tune(result, metric).savefig(figure, format="png", dpi=120)
        write_output_set(Path(out), {"tune.json": json_bytes(record), "tune.png": figure.getvalue()}, TUNE_FILES,
                         what="a long-document tuning")  # fmt: skip
    return result, record
