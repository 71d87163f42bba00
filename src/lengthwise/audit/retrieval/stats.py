"""Statistics of the retrieval length-bias audit (METHODS §6): plain functions on arrays, no model, no I/O.

Correlations come from `scipy.stats.spearmanr`; paired tests are Wilcoxon signed-rank tests
(`scipy.stats.wilcoxon`); confidence intervals are BCa bootstraps (`scipy.stats.bootstrap`, ``paired=True`` for
paired data); the position effect across depths is a Friedman test (`scipy.stats.friedmanchisquare`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
from scipy import stats

from lengthwise.audit.retrieval.result import Correlation, PairedShift
from lengthwise.core.errors import SettingError
from lengthwise.core.stats import mean_difference, paired_bootstrap

__all__ = [
    "friedman",
    "length_percentiles",
    "mean_ci",
    "paired_shift",
    "partial_spearman",
    "spearman",
    "two_sample_ks",
    "wilcoxon_p",
]


def spearman(x: np.ndarray, y: np.ndarray) -> Correlation:
    """Spearman ρ of x and y, (n,) each. A constant input gives ρ = 0, p = 1 (no monotone link can be seen)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(rho=0.0, p_value=1.0, n=len(x))
    result = stats.spearmanr(x, y)
    return Correlation(rho=float(result.statistic), p_value=float(result.pvalue), n=len(x))


def partial_spearman(groups: Iterable[tuple[np.ndarray, np.ndarray]]) -> tuple[float, np.ndarray]:
    """Spearman correlation of x with y given the group, and the correlation inside each group.

    `groups` yields ``(x, y)`` per group (e.g. per query: the scores of its non-relevant documents and their
    lengths). Both are ranked within the group and centred on the group's mean rank; the pooled correlation of
    these residuals is the partial rank correlation controlling for the group (a categorical control). Returns
    the pooled ρ and the per-group ρ, (G,); a group with fewer than 3 items or a constant side gives ρ = 0.
    """
    sxy = sxx = syy = 0.0
    per_group: list[float] = []
    for x, y in groups:
        if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
            per_group.append(0.0)
            continue
        rx, ry = stats.rankdata(x), stats.rankdata(y)
        rx, ry = rx - rx.mean(), ry - ry.mean()
        gxy, gxx, gyy = float(rx @ ry), float(rx @ rx), float(ry @ ry)
        sxy, sxx, syy = sxy + gxy, sxx + gxx, syy + gyy
        per_group.append(gxy / np.sqrt(gxx * gyy))
    pooled = sxy / np.sqrt(sxx * syy) if sxx > 0 and syy > 0 else 0.0
    return float(pooled), np.asarray(per_group, dtype=np.float64)


def wilcoxon_p(delta: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value that `delta` (paired differences, or values against 0) centre on 0;
    1 when none is non-zero."""
    delta = np.asarray(delta, dtype=np.float64)
    if not np.any(delta != 0):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a handful of non-zero differences: scipy warns
        return float(stats.wilcoxon(delta).pvalue)


def _interval(result: Any, fallback: float) -> list[float]:
    """A bootstrap result's 95 % interval; `fallback` twice when scipy could not compute it (degenerate data)."""
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return [fallback, fallback] if not (np.isfinite(low) and np.isfinite(high)) else [low, high]


def paired_shift(before: np.ndarray, after: np.ndarray, *, seed: int = 0, resamples: int = 2000) -> PairedShift:
    """Compare paired values, (n,) each: the mean of ``after − before`` with a BCa bootstrap 95 % interval
    (`scipy.stats.bootstrap`, ``paired=True``), the median difference and a Wilcoxon signed-rank p-value."""
    before, after = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    if before.shape != after.shape or before.ndim != 1 or len(before) == 0:
        problem = f"paired values need two equal non-empty 1-D arrays, got before {before.shape}"
        raise SettingError("after", after.shape, problem)
    delta = after - before
    mean = float(delta.mean())
    ci = [mean, mean]
    if len(delta) > 2 and np.ptp(delta) > 0:
        _, low, high = paired_bootstrap(
            (before, after), mean_difference, resamples=resamples, method="BCa", seed=seed, vectorized=True
        )
        ci = [low, high]
    return PairedShift(
        n=len(delta),
        mean_before=float(before.mean()),
        mean_after=float(after.mean()),
        mean_delta=mean,
        ci95=ci,
        median_delta=float(np.median(delta)),
        p_value=wilcoxon_p(delta),
        n_changed=int(np.count_nonzero(delta)),
    )


def mean_ci(values: np.ndarray, *, seed: int = 0, resamples: int = 2000) -> tuple[float, list[float]]:
    """The mean of `values`, (n,), and its BCa bootstrap 95 % interval."""
    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    if len(values) < 3 or np.ptp(values) == 0:
        return mean, [mean, mean]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.bootstrap(
            (values,), np.mean, vectorized=True, n_resamples=resamples, method="BCa", rng=np.random.default_rng(seed)
        )
    return mean, _interval(result, mean)


def length_percentiles(reference: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Where each length sits in the reference distribution, in [0, 1]: the share of reference lengths below it
    plus half the share equal to it (`scipy.stats.percentileofscore` with ``kind="mean"``, vectorised). A draw
    from the reference itself averages 0.5. (n,) → (n,)."""
    ordered = np.sort(np.asarray(reference))
    lengths = np.asarray(lengths)
    below = np.searchsorted(ordered, lengths, side="left")
    at_or_below = np.searchsorted(ordered, lengths, side="right")
    return (below + at_or_below) / (2.0 * len(ordered))


def two_sample_ks(sample: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """Two-sample Kolmogorov–Smirnov test of two length distributions: statistic and p-value."""
    result = stats.ks_2samp(np.asarray(sample), np.asarray(reference))
    return {"statistic": float(result.statistic), "p_value": float(result.pvalue)}


def friedman(measurements: np.ndarray) -> dict[str, float]:
    """Friedman test that k paired conditions differ: `measurements` is (k, n), one row per condition.

    Needs k ≥ 3; identical rows give statistic 0 and p = 1.
    """
    measurements = np.asarray(measurements, dtype=np.float64)
    if measurements.ndim != 2 or measurements.shape[0] < 3:
        raise SettingError("measurements", measurements.shape, "the Friedman test needs (k ≥ 3, n) measurements")
    if np.all(measurements == measurements[0]):
        return {"statistic": 0.0, "p_value": 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.friedmanchisquare(*measurements)
    statistic, p_value = float(result.statistic), float(result.pvalue)
    return {
        "statistic": statistic if np.isfinite(statistic) else 0.0,
        "p_value": p_value if np.isfinite(p_value) else 1.0,
    }
