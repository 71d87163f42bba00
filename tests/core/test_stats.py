"""The one paired bootstrap (`lengthwise.core.stats`)."""

from __future__ import annotations

import numpy as np

from lengthwise.core.stats import paired_bootstrap


def test_a_paired_interval_holds_the_true_shift_and_pairing_narrows_it() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, 400)  # large item-to-item spread that pairing removes
    shifted = base + 0.1 + rng.normal(0, 0.05, 400)
    point, low, high = paired_bootstrap((base, shifted))
    assert low < 0.1 < high and abs(point - np.mean(shifted - base)) < 1e-12
    assert high - low < 0.03  # an unpaired interval would be about 0.28 wide here
    assert paired_bootstrap((base, shifted)) == (point, low, high)  # seeded: the same interval again


def test_too_few_items_give_the_point_twice() -> None:
    assert paired_bootstrap((np.array([1.0, 2.0]), np.array([2.0, 4.0]))) == (1.5, 1.5, 1.5)
