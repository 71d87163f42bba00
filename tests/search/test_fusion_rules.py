"""The fusion rules of issue 49 (`lengthwise.core.fusion`, `lengthwise.search.fusion.fuse` / `fuse_exact`):
each rule's arithmetic on hand-made scores, worked out here from its definition."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import fuse_normalised, normalised, spread_weights
from lengthwise.search.fusion import Fusion, FusionSettings, exact_candidates, fuse, fuse_exact

LEXICAL = np.array([1.0, 2.0, 3.0, 10.0])  # mean 4; Σ(s − mean)² = 9 + 4 + 1 + 36 = 50
DENSE = np.array([0.5, 0.4, 0.45, 0.41])  # mean 0.44; Σ(s − mean)² = 0.0036 + 0.0016 + 0.0001 + 0.0009 = 0.0062


def test_zscore_is_the_distance_from_the_mean_in_population_sigmas() -> None:
    sigma = math.sqrt(50 / 4)
    np.testing.assert_allclose(normalised(LEXICAL, "zscore"), [(s - 4) / sigma for s in (1, 2, 3, 10)])


def test_minmax_maps_the_lowest_to_0_and_the_highest_to_1() -> None:
    np.testing.assert_allclose(normalised(LEXICAL, "minmax"), [0.0, 1 / 9, 2 / 9, 1.0])


def test_dbsf_scales_mean_plus_minus_3_sample_sigmas_to_0_and_1() -> None:
    sigma = math.sqrt(50 / 3)  # the sample σ, as Qdrant's Welford estimate
    expected = [(s - (4 - 3 * sigma)) / (6 * sigma) for s in (1, 2, 3, 10)]
    np.testing.assert_allclose(normalised(LEXICAL, "dbsf"), expected)


def test_dbsf_clips_a_score_beyond_3_sigmas_where_zscore_does_not() -> None:
    scores = np.array([0.0] * 20 + [100.0])  # one exact match far above the crowd
    mean, sigma = scores.mean(), scores.std(ddof=1)
    assert (100 - (mean - 3 * sigma)) / (6 * sigma) > 1.0  # unclipped it would pass 1
    assert normalised(scores, "dbsf")[-1] == 1.0
    assert normalised(scores, "zscore")[-1] == pytest.approx((100 - mean) / scores.std())


@pytest.mark.parametrize(("how", "flat"), [("zscore", 0.0), ("minmax", 0.0), ("dbsf", 0.5)])
def test_equal_scores_carry_no_order(how: str, flat: float) -> None:
    np.testing.assert_array_equal(normalised(np.full(5, 3.0), how), np.full(5, flat))
    np.testing.assert_array_equal(normalised(np.array([7.0]), how), [flat])


def test_an_unknown_normaliser_is_refused_by_name() -> None:
    with pytest.raises(SettingError, match="fusion='median': not a normaliser; use one of zscore, minmax, dbsf"):
        normalised(LEXICAL, "median")


def test_spread_weights_are_each_sides_best_z_score_over_their_sum() -> None:
    dense_peak = (0.5 - 0.44) / math.sqrt(0.0062 / 4)
    lexical_peak = (10 - 4) / math.sqrt(50 / 4)
    total = dense_peak + lexical_peak
    np.testing.assert_allclose(spread_weights([DENSE, LEXICAL]), [dense_peak / total, lexical_peak / total])


def test_a_side_without_spread_weighs_nothing_and_two_share_equally() -> None:
    np.testing.assert_allclose(spread_weights([np.full(4, 0.3), LEXICAL]), [0.0, 1.0])
    np.testing.assert_allclose(spread_weights([np.zeros(4), np.ones(4)]), [0.5, 0.5])


def test_fuse_normalised_is_the_weighted_sum_and_the_adaptive_weights_when_none() -> None:
    z_dense, z_lexical = normalised(DENSE, "zscore"), normalised(LEXICAL, "zscore")
    np.testing.assert_allclose(fuse_normalised([DENSE, LEXICAL], [0.3, 0.7], "zscore"), 0.3 * z_dense + 0.7 * z_lexical)
    weights = spread_weights([DENSE, LEXICAL])
    np.testing.assert_allclose(
        fuse_normalised([DENSE, LEXICAL], None, "zscore"), weights[0] * z_dense + weights[1] * z_lexical
    )
    three = fuse_normalised([DENSE, LEXICAL, LEXICAL / 2], [0.5, 0.25, 0.25], "minmax")
    np.testing.assert_allclose(three, 0.5 * normalised(DENSE, "minmax") + 0.5 * normalised(LEXICAL, "minmax"))
    with pytest.raises(ValueError, match="1 weights for 2 sides"):
        fuse_normalised([DENSE, LEXICAL], [1.0], "zscore")


@pytest.mark.parametrize("fusion", ["zscore", "minmax", "dbsf"])
def test_hybrid_fuse_weights_the_lexical_side_by_w(fusion: str) -> None:
    fused = fuse(DENSE, LEXICAL, FusionSettings(Fusion(fusion), weight=0.25))
    expected = 0.75 * normalised(DENSE, fusion) + 0.25 * normalised(LEXICAL, fusion)
    np.testing.assert_allclose(fused, expected)


def test_adaptive_follows_the_side_whose_best_stands_out() -> None:
    """Dense prefers document 0; BM25 singles out document 3 (an exact name) a little further from its crowd.
    Convex at a small lexical weight keeps dense's first; the adaptive rule weighs BM25 more on this query and
    ranks document 3 first."""
    dense = np.array([0.80, 0.50, 0.49, 0.60, 0.48])
    lexical = np.array([1.0, 1.2, 0.9, 3.0, 1.1])
    assert fuse(dense, lexical, FusionSettings(Fusion.CONVEX, weight=0.1)).argmax() == 0
    adaptive = fuse(dense, lexical, FusionSettings(Fusion.ADAPTIVE))
    assert adaptive.argmax() == 3
    weights = spread_weights([dense, lexical])
    assert weights[1] > weights[0]
    np.testing.assert_allclose(adaptive, fuse_normalised([dense, lexical], list(weights), "zscore"))


def test_fuse_exact_fuses_the_union_of_each_sides_best_and_leaves_the_rest_out() -> None:
    dense = np.array([0.9, 0.8, 0.1, 0.2, 0.3, 0.0])
    lexical = np.array([0.0, 1.0, 5.0, 4.0, 0.5, 0.2])
    np.testing.assert_array_equal(exact_candidates(dense, lexical, 2), [0, 1, 2, 3])
    settings = FusionSettings(Fusion.ZSCORE, weight=0.5)
    fused = fuse_exact(dense, lexical, settings, depth=2)
    assert np.isneginf(fused[[4, 5]]).all()
    np.testing.assert_allclose(fused[:4], fuse(dense[:4], lexical[:4], settings))
    convex = FusionSettings(Fusion.CONVEX, weight=0.5)  # independent of the candidates: every document fused
    np.testing.assert_allclose(fuse_exact(dense, lexical, convex, depth=2), fuse(dense, lexical, convex))


@pytest.mark.parametrize("fusion", ["zscore", "minmax", "dbsf", "adaptive"])
def test_new_fusions_round_trip_through_the_recorded_dict(fusion: str) -> None:
    settings = FusionSettings(Fusion(fusion), weight=0.4, depth=50)
    assert FusionSettings.from_dict(settings.to_dict()) == settings


def test_an_unknown_fusion_is_refused_naming_the_field() -> None:
    with pytest.raises(SettingError) as caught:
        FusionSettings("median")  # type: ignore[arg-type]
    assert caught.value.field == "fusion"
