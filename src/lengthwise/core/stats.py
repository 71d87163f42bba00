"""The one paired bootstrap every comparison uses: studies, benchmarks and the retrieval audit.

A paired bootstrap resamples the *items* (pairs, queries) together across the arrays it is given, so an interval
for "model B minus model A" keeps each item's pairing (`scipy.stats.bootstrap` with ``paired=True``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

__all__ = ["mean_difference", "paired_bootstrap"]


def mean_difference(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
    """mean(second − first) along `axis`: the default statistic (e.g. after − before, or ours − theirs)."""
    return np.mean(second - first, axis=axis)


def paired_bootstrap(
    arrays: Sequence[np.ndarray],
    statistic: Callable[..., float | np.ndarray] = mean_difference,
    *,
    resamples: int = 2000,
    method: str = "percentile",
    seed: int = 0,
    vectorized: bool | None = None,
) -> tuple[float, float, float]:
    """(point, low, high): `statistic` on `arrays` and its paired 95 % bootstrap interval.

    Args:
        arrays: Equal-length 1-D arrays, item i of each belonging together.
        statistic: A function of the arrays (with an ``axis`` argument when `vectorized`); default
            `mean_difference` (second minus first).
        resamples: Bootstrap resamples.
        method: ``percentile`` or ``BCa`` (scipy's names).
        seed: Seeds `numpy.random.default_rng`, so an interval is reproducible.
        vectorized: Passed to scipy (None: scipy decides from the statistic's signature).

    Returns:
        The statistic on the data and the interval's ends; both ends equal the point when fewer than three items
        leave nothing to resample or scipy cannot compute the interval (degenerate data).
    """
    arrays = tuple(np.asarray(a, dtype=np.float64) for a in arrays)
    point = float(statistic(*arrays))
    if len(arrays[0]) < 3:
        return point, point, point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa on a few distinct values warns about its acceleration estimate
        result = stats.bootstrap(arrays, statistic, paired=True, vectorized=vectorized, n_resamples=resamples,
                                 method=method, rng=np.random.default_rng(seed))  # fmt: skip
    low, high = (float(x) for x in result.confidence_interval)
    if not (np.isfinite(low) and np.isfinite(high)):
        return point, point, point
    return point, low, high
