"""Similarity-shift statistics: pure functions on arrays (METHODS §1, "Attack on pairs").

No model, no I/O: inputs are embeddings or similarity vectors, outputs are numbers and plain dicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import permutation_test

from lengthwise.audit.config import HistogramSpec
from lengthwise.audit.schema import ShiftSection
from lengthwise.core.errors import SettingError

__all__ = [
    "JSDNull",
    "js_distance",
    "js_distance_null",
    "similarity_histogram",
    "similarity_shift",
]


def similarity_histogram(values: np.ndarray, spec: HistogramSpec = HistogramSpec()) -> np.ndarray:
    """Counts of `values` in `spec`'s bins; values outside [low, high] are clipped into the end bins."""
    clipped = np.clip(np.asarray(values, dtype=np.float64), spec.low, spec.high)
    counts, _ = np.histogram(clipped, bins=spec.edges)
    return counts


def js_distance(x: np.ndarray, y: np.ndarray, spec: HistogramSpec = HistogramSpec()) -> float:
    """Jensen–Shannon distance (base 2: sqrt of the divergence, in [0, 1]) between two samples' histograms."""
    hx, hy = similarity_histogram(x, spec), similarity_histogram(y, spec)
    if hx.sum() == 0 or hy.sum() == 0:
        raise SettingError(None, None, "js_distance needs two non-empty samples x and y")
    return float(jensenshannon(hx / hx.sum(), hy / hy.sum(), base=2))


@dataclass(frozen=True)
class JSDNull:
    """What the JS distance of paired samples would be if the transformation changed nothing (sampling alone).

    `mean` and `q95` summarise the JSD under within-pair swaps; `p_value` is the share of swaps (plus the
    observed one, unless the test was exact) whose JSD reaches the observed JSD: a small value means the shift
    is more than histogram noise. `permutations` is the number of swap patterns drawn (or all 2^n of them).
    """

    observed: float
    mean: float
    q95: float
    p_value: float
    permutations: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def js_distance_null(
    before: np.ndarray,
    after: np.ndarray,
    spec: HistogramSpec = HistogramSpec(),
    *,
    permutations: int = 200,
    seed: int = 0,
) -> JSDNull:
    """Paired permutation null of the JS distance between `before` and `after` (same pairs, same order).

    Under "the transformation changes nothing" the two similarities of a pair are exchangeable, so each
    permutation swaps each pair's before/after with probability ½ and recomputes the JSD
    (`scipy.stats.permutation_test`, ``permutation_type="samples"``, one-sided: a larger JSD is the effect).
    With ``2**n <= permutations`` every swap pattern is enumerated (an exact test). At a few hundred pairs a
    100-bin histogram is sparse and the JSD of two samples from one distribution is far from 0 (about 0.3 at
    n = 200), which this null makes visible.
    """
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if before.shape != after.shape or before.ndim != 1 or before.size == 0:
        problem = f"js_distance_null needs two equal-length 1-D samples, got before {before.shape}"
        raise SettingError("after", after.shape, problem)
    if permutations < 1:
        raise SettingError("permutations", permutations, "js_distance_null needs at least 1 permutation")

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        x2, y2 = np.atleast_2d(x), np.atleast_2d(y)  # (R, n): one row per resample
        values = np.array([js_distance(a, b, spec) for a, b in zip(x2, y2, strict=True)])
        return values if np.ndim(x) > 1 else values[0]

    if before.size == 1:  # scipy needs two observations; the two swap patterns of one pair give the same JSD
        observed = js_distance(before, after, spec)
        return JSDNull(observed=observed, mean=observed, q95=observed, p_value=1.0, permutations=2)
    result = permutation_test(
        (before, after),
        statistic,
        permutation_type="samples",
        vectorized=True,
        n_resamples=permutations,
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    null = np.asarray(result.null_distribution, dtype=np.float64)
    return JSDNull(
        observed=float(result.statistic),
        mean=float(null.mean()),
        q95=float(np.quantile(null, 0.95)),
        p_value=float(result.pvalue),
        permutations=int(null.size),
    )


def similarity_shift(before: np.ndarray, after: np.ndarray, spec: HistogramSpec = HistogramSpec()) -> ShiftSection:
    """Summarize paired similarities before/after a transformation (e.g. elongation).

    `median_shift` is the median of the per-pair differences; `frac_increased` counts pairs whose similarity
    rose strictly.
    """
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if before.shape != after.shape or before.ndim != 1 or before.size == 0:
        problem = f"similarity_shift needs two equal-length 1-D samples, got before {before.shape}"
        raise SettingError("after", after.shape, problem)
    diff = after - before
    return ShiftSection(
        n=int(before.size),
        mean_before=float(before.mean()),
        mean_after=float(after.mean()),
        median_before=float(np.median(before)),
        median_after=float(np.median(after)),
        mean_shift=float(diff.mean()),
        median_shift=float(np.median(diff)),
        frac_increased=float((diff > 0).mean()),
        js_distance=js_distance(before, after, spec),
    )
