"""Choosing the TempScale temperature on a dev split (METHODS §2): a grid and/or a bounded 1-D search.

The tuner knows nothing about tasks: it maximises (or minimises) any ``objective(config) -> float``, e.g.
STS Spearman, retrieval nDCG@10 or classification accuracy of a `TempScaleEncoder`. t = 1 (no TempScale)
is always evaluated so the curve shows the gain over the untouched model. `tune_model` tunes a loaded model on a
score of its encoder (the evaluation room's, handed over by `lengthwise.tune_tempscale`) and writes ``tune.json``
and ``tune.png`` as one output set.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.tempscale.config import TempScaleConfig, TempScaleError

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.encoder import TextEncoder
    from lengthwise.tempscale.schema import TuneRecord, TuneSummary

__all__ = [
    "TUNE_FILES",
    "Objective",
    "Side",
    "TuneResult",
    "TuneSpec",
    "config_for",
    "plot_tune_curve",
    "tune_model",
    "tune_temperature",
]

TUNE_FILES = ("tune.json", "tune.png")  # what a tuning writes, as one output set

Objective = Callable[[TempScaleConfig], float]


class Side(str, Enum):
    """Which temperature is tuned: t (both sides), t_query or t_doc."""

    BOTH = "both"
    QUERY = "query"
    DOCUMENT = "document"


@dataclass(frozen=True)
class TuneSpec:
    """What to tune and how.

    `side`: "both" sets `t` (symmetric, and queries/documents unless `base` sets them), "query" sets
    `t_query`, "document" sets `t_doc`; every other field comes from `base` (e.g. a length schedule).
    The bounded search (scipy's Brent method) runs over `bounds`, or by default between the grid
    neighbours of the best grid point; it stops at `xatol` or after `max_evals` evaluations.
    """

    grid: tuple[float, ...] = field(
        default=(0.5, 0.6, 0.7, 0.8, 0.9, 1.0), metadata={"help": "Temperatures evaluated first (t = 1 always is)."}
    )
    search: bool = field(default=True, metadata={"help": "Refine by a bounded 1-D search after the grid."})
    bounds: tuple[float, float] | None = field(
        default=None, metadata={"help": "Search interval LOW HIGH (default: the best grid point's neighbours)."}
    )
    xatol: float = field(default=0.01, metadata={"help": "Search tolerance on t."})
    max_evals: int = field(default=10, metadata={"help": "Most evaluations the search may add."})
    side: Side = field(default=Side.BOTH, metadata={"help": "Tune t (both), t_query (query) or t_doc (document)."})
    base: TempScaleConfig = field(default_factory=TempScaleConfig)
    maximize: bool = True

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "side", Side(self.side))
        except ValueError:
            raise TempScaleError(field="side", value=self.side, problem="use both, query or document") from None
        object.__setattr__(self, "grid", tuple(sorted({float(t) for t in self.grid})))
        if any(not math.isfinite(t) or t <= 0 for t in self.grid):
            raise TempScaleError(
                field="grid", value=self.grid, problem="must hold positive temperatures, e.g. 0.6,0.8,1.0"
            )
        if not self.grid and not self.search:
            raise TempScaleError(field=None, value=None, problem="nothing to tune: give a grid, a search, or both")
        if self.bounds is not None and not (
            all(map(math.isfinite, self.bounds)) and 0 < self.bounds[0] < self.bounds[1]
        ):
            raise TempScaleError(field="bounds", value=self.bounds, problem="must satisfy 0 < low < high")
        if self.search and self.bounds is None and len(self.grid) < 2:
            raise TempScaleError(
                field=None,
                value=None,
                problem="a search without bounds needs a grid of at least two temperatures to bracket",
            )
        if not self.xatol > 0:
            raise TempScaleError(field="xatol", value=self.xatol, problem="must be > 0")
        if self.max_evals < 1:
            raise TempScaleError(field="max_evals", value=self.max_evals, problem="must be ≥ 1")
        for t in (*self.grid, *(self.bounds or ())):
            config_for(self, t)  # each temperature the tuner may try is a valid configuration


@dataclass(frozen=True)
class TuneResult:
    """Every evaluated (t, score) in t order, the best point, the score at t = 1 and where each came from."""

    curve: tuple[tuple[float, float], ...]
    sources: tuple[str, ...]  # "grid", "search" or "baseline", aligned with `curve`
    best_t: float
    best_score: float
    baseline_score: float
    side: Side

    def to_dict(self) -> TuneSummary:
        return {
            "side": Side(self.side).value,
            "best_t": self.best_t,
            "best_score": self.best_score,
            "baseline_score": self.baseline_score,
            "gain": self.best_score - self.baseline_score,
            "curve": [
                {"t": t, "score": s, "source": src} for (t, s), src in zip(self.curve, self.sources, strict=True)
            ],
        }


def config_for(spec: TuneSpec, t: float) -> TempScaleConfig:
    """The configuration evaluated at temperature `t` for `spec.side`."""
    side = Side(spec.side)
    try:
        if side is Side.QUERY:
            return replace(spec.base, t_query=t)
        if side is Side.DOCUMENT:
            return replace(spec.base, t_doc=t)
        return replace(spec.base, t=t)
    except TempScaleError as err:  # the grid or the bounds hold a temperature out of range
        raise TempScaleError(field="grid/bounds", value=t, problem=err.problem) from None


def _search_bounds(spec: TuneSpec, scores: dict[float, float]) -> tuple[float, float]:
    if spec.bounds is not None:
        return spec.bounds
    grid = list(spec.grid)
    best = max(grid, key=lambda t: scores[t] if spec.maximize else -scores[t])
    index = grid.index(best)
    return grid[max(index - 1, 0)], grid[min(index + 1, len(grid) - 1)]


def tune_temperature(
    objective: Objective,
    spec: TuneSpec | None = None,
    *,
    on_eval: Callable[[float, float], None] | None = None,
) -> TuneResult:
    """Evaluate `objective` on the grid, then refine by a bounded 1-D search; each t is evaluated once."""
    from scipy.optimize import minimize_scalar

    spec = spec or TuneSpec()
    scores: dict[float, float] = {}
    sources: dict[float, str] = {}

    def score(t: float, source: str) -> float:
        t = round(float(t), 6)
        if t not in scores:
            value = float(objective(config_for(spec, t)))
            if not math.isfinite(value):
                raise TempScaleError(
                    field=None, value=None, problem=f"the objective returned {value} at t={t}; check the dev data"
                )
            scores[t], sources[t] = value, source
            if on_eval is not None:
                on_eval(t, value)
        return scores[t]

    score(1.0, "baseline")
    for t in spec.grid:
        score(t, "grid")
    if spec.search:
        low, high = _search_bounds(spec, scores)
        if high > low:
            sign = -1.0 if spec.maximize else 1.0
            minimize_scalar(
                lambda t: sign * score(t, "search"),
                bounds=(low, high),
                method="bounded",
                options={"xatol": spec.xatol, "maxiter": spec.max_evals},
            )
    ordered = sorted(scores)
    best = max(ordered, key=lambda t: scores[t] if spec.maximize else -scores[t])
    return TuneResult(
        curve=tuple((t, scores[t]) for t in ordered),
        sources=tuple(sources[t] for t in ordered),
        best_t=best,
        best_score=scores[best],
        baseline_score=scores[1.0],
        side=spec.side,
    )


def plot_tune_curve(result: TuneResult, metric: str) -> Figure:
    """The score against t: grid and search points, the best t and the t = 1 baseline."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.0, 3.8), layout="constrained")
    axes = figure.add_subplot()
    ts, values = zip(*result.curve, strict=True)
    axes.plot(ts, values, color="0.6", linewidth=1, zorder=1)
    for source, marker in (("grid", "o"), ("search", "x"), ("baseline", "s")):
        points = [(t, s) for (t, s), src in zip(result.curve, result.sources, strict=True) if src == source]
        if points:
            axes.scatter(*zip(*points, strict=True), marker=marker, label=source, zorder=2)
    axes.axhline(result.baseline_score, color="0.4", linestyle=":", linewidth=1)
    axes.axvline(result.best_t, color="tab:red", linestyle="--", linewidth=1, label=f"best t = {result.best_t:.3g}")
    axes.set_xlabel({Side.BOTH: "t", Side.QUERY: "t (queries)", Side.DOCUMENT: "t (documents)"}[Side(result.side)])
    axes.set_ylabel(metric)
    axes.set_title(f"TempScale: {metric} vs temperature")
    axes.legend(frameon=False, fontsize="small")
    return figure


def tune_model(
    model: SentenceTransformer,
    score: Callable[[TextEncoder], float],
    spec: TuneSpec | None = None,
    *,
    name: str | os.PathLike[str],
    task: str,
    metric: str,
    data: dict[str, Any],
    settings: dict[str, Any],
    out: str | os.PathLike[str] | None = None,
    on_eval: Callable[[float, float], None] | None = None,
    started: float | None = None,
) -> TuneRecord:
    """Tune t for `model` (without a TempScale of its own) on `score` of its `TempScaleEncoder`, and make the record
    (`TuneRecord`: provenance, `task` and `metric` as named, the curve), written to `out` with its plot when given
    (``tune.json``, ``tune.png``, checked by the caller before the model loaded).

    Args:
        model: The loaded model.
        score: The dev score of an encoder (higher is better), e.g. `lengthwise.evaluation.objectives.dev_objective`.
        spec: The grid and the bounded 1-D search (default: `TuneSpec()`).
        name: The model's name or path, as recorded in its fingerprint.
        task, metric, data: What `score` measures and on which data (a description), for the record.
        settings: The caller's settings for the record (the spec's are added).
        out: Where the output set is written; None writes nothing.
        on_eval: Called with (t, score) after each evaluation.
        started: `time.perf_counter()` when the job began (default: now).
    """
    import io
    import time

    from lengthwise.core.models import model_fingerprint
    from lengthwise.core.output_set import write_output_set
    from lengthwise.core.results import json_bytes, provenance
    from lengthwise.tempscale.apply import TempScaleEncoder
    from lengthwise.tempscale.schema import TuneRecord

    started = time.perf_counter() if started is None else started
    spec = spec or TuneSpec()
    result = tune_temperature(lambda config: score(TempScaleEncoder(model, config)), spec, on_eval=on_eval)
    bounds = list(spec.bounds) if spec.bounds else None
    made = {"grid": list(spec.grid), "search": spec.search, "bounds": bounds, "xatol": spec.xatol,
            "max_evals": spec.max_evals, "side": spec.side.value} | settings  # fmt: skip
    record = TuneRecord(
        **provenance(model_fingerprint(model, name), data, made, started=started),
        task=task,
        metric=metric,
        result=result.to_dict(),
    )
    if out is not None:
        figure = io.BytesIO()
        plot_tune_curve(result, metric).savefig(figure, format="png", dpi=120)
        files = {"tune.json": json_bytes(record), "tune.png": figure.getvalue()}
        write_output_set(Path(out), files, TUNE_FILES, what="a TempScale tuning")
    return record
