from __future__ import annotations

import numpy as np
import pytest

from lengthwise.audit.config import HistogramSpec
from lengthwise.audit.pairs.shift import (
    js_distance,
    js_distance_null,
    similarity_histogram,
    similarity_shift,
)
from lengthwise.core.errors import SettingError


def test_js_distance_of_identical_samples_is_zero() -> None:
    x = np.random.default_rng(0).uniform(-1, 1, 500)
    assert js_distance(x, x.copy()) == pytest.approx(0.0, abs=1e-12)


def test_js_distance_of_disjoint_samples_is_one() -> None:
    assert js_distance(np.full(50, -0.5), np.full(80, 0.5)) == pytest.approx(1.0)


def test_js_distance_matches_scipy_on_histograms() -> None:
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(1)
    x, y = rng.normal(0.2, 0.1, 300), rng.normal(0.4, 0.2, 300)
    spec = HistogramSpec(bins=20)
    hx, hy = similarity_histogram(x, spec), similarity_histogram(y, spec)
    expected = jensenshannon(hx / hx.sum(), hy / hy.sum(), base=2)
    assert js_distance(x, y, spec) == pytest.approx(expected)


def test_histogram_clips_out_of_range_values() -> None:
    counts = similarity_histogram(np.array([-1.5, 1.0, 1.2]), HistogramSpec(bins=4))
    assert counts.tolist() == [1, 0, 0, 2]


def test_similarity_shift_summary() -> None:
    before = np.array([0.1, 0.2, 0.3, 0.4])
    after = np.array([0.2, 0.2, 0.5, 0.3])
    stats = similarity_shift(before, after)
    assert stats["n"] == 4
    assert stats["mean_before"] == pytest.approx(0.25)
    assert stats["mean_after"] == pytest.approx(0.3)
    assert stats["mean_shift"] == pytest.approx(0.05)
    assert stats["frac_increased"] == pytest.approx(0.5)  # equal does not count as risen
    assert 0.0 < stats["js_distance"] <= 1.0


def test_histogram_spec_validation() -> None:
    with pytest.raises(ValueError):
        HistogramSpec(bins=1)
    with pytest.raises(ValueError):
        HistogramSpec(low=1.0, high=-1.0)


def test_js_null_separates_a_real_shift_from_histogram_noise() -> None:
    rng = np.random.default_rng(0)
    before = np.tanh(rng.normal(0.6, 0.3, 217))  # the study-1 pair count
    unchanged = js_distance_null(before, before + rng.normal(0, 0.02, before.size))
    after = before + 0.15 + rng.normal(0, 0.02, before.size)
    shifted = js_distance_null(before, after)
    assert unchanged.mean > 0.1  # a sparse 100-bin histogram: far from 0 even with nothing changed
    assert shifted.p_value < 0.01 and shifted.observed > shifted.q95
    assert shifted.observed == js_distance(before, after)
    assert js_distance_null(before, after, seed=3) == js_distance_null(before, after, seed=3)


def test_js_null_level_falls_with_sample_size_and_rejects_at_its_rate() -> None:
    rng = np.random.default_rng(1)
    levels = [js_distance_null(x := rng.normal(0.5, 0.2, n), x + rng.normal(0, 0.05, n), permutations=50).mean
              for n in (200, 2000, 20000)]  # fmt: skip
    assert levels[0] > levels[1] > levels[2]
    # exchangeable before/after (same distribution): a 5% test should reject about 5% of the time
    rejections = sum(
        js_distance_null(rng.normal(0.5, 0.2, 150), rng.normal(0.5, 0.2, 150), permutations=39, seed=s).p_value <= 0.05
        for s in range(60)
    )
    assert rejections <= 9  # P(Binomial(60, 0.05) > 9) < 0.01


def test_js_null_validation() -> None:
    with pytest.raises(SettingError, match=r"after=\(4,\): js_distance_null needs two equal-length"):
        js_distance_null(np.zeros(3), np.zeros(4))
    with pytest.raises(SettingError, match="permutations=0: js_distance_null needs at least 1 permutation"):
        js_distance_null(np.zeros(3), np.zeros(3), permutations=0)
