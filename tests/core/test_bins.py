from __future__ import annotations

import numpy as np
import pytest

from lengthwise.core.bins import BinCounting, LengthBins, per_bin, token_lengths
from lengthwise.core.embed import TokenView
from lengthwise.core.errors import SettingError


def test_labels_and_assignment_at_the_edges() -> None:
    bins = LengthBins(width=100, max_content=254)
    assert bins.labels() == ["0-99", "100-199", "200-254", ">254 (truncated)"]
    lengths = np.asarray([0, 99, 100, 199, 200, 254, 255, 9000])
    assert bins.assign(lengths).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_budget_on_a_bin_edge_gets_its_own_one_token_bin() -> None:
    bins = LengthBins(width=100, max_content=300)
    assert bins.labels() == ["0-99", "100-199", "200-299", "300-300", ">300 (truncated)"]
    assert bins.assign(np.asarray([299, 300, 301])).tolist() == [2, 3, 4]


def test_bad_spec_is_refused() -> None:
    with pytest.raises(SettingError, match="width=0: the bin width must be ≥ 1"):
        LengthBins(width=0)


def test_per_bin_counts_and_keeps_empty_bins() -> None:
    bins = LengthBins(width=10, max_content=25)
    index = bins.assign(np.asarray([1, 2, 30, 31, 32]))
    values = np.asarray([1.0, 3.0, 5.0, 7.0, 9.0])
    rows = per_bin(bins, index, lambda mask: {"mean": float(values[mask].mean())})
    assert rows == [
        {"bin": "0-9", "count": 2, "mean": 2.0},
        {"bin": "10-19", "count": 0},
        {"bin": "20-25", "count": 0},
        {"bin": ">25 (truncated)", "count": 3, "mean": 7.0},
    ]


def test_token_lengths_are_untruncated_content_lengths(tiny_model) -> None:
    view = TokenView(tiny_model)
    long_text = "word " * 300
    lengths = token_lengths(view, ["hello world", long_text], batch_size=1)
    assert lengths.tolist() == [2, 300]
    assert LengthBins.for_view(view).max_content == view.max_content == 62


def test_after_truncation_bins_count_what_the_model_saw() -> None:
    """The document diagnostics' convention: 1–w, w+1–2w, …; a cut text (n = budget) sits in the last bin."""
    bins = LengthBins(width=32, max_content=254, counting=BinCounting.AFTER_TRUNCATION)
    assert bins.labels()[0] == "1–32" and bins.labels()[-1] == "225–254" and len(bins.labels()) == 8
    assert bins.assign(np.asarray([1, 32, 33, 254])).tolist() == [0, 0, 1, 7]
    assert bins.row(7) == {"bin": 7, "label": "225–254", "middle": 239.5}
    assert bins.describe()["counting"] == "after_truncation"
    assert LengthBins(width=100, max_content=254).describe()["counting"] == "before_truncation"


def test_default_bins_are_eight_across_the_window(tiny_model) -> None:
    bins = LengthBins.default(TokenView(tiny_model))
    assert (bins.width, bins.max_content, bins.counting) == (16, 62, BinCounting.AFTER_TRUNCATION)


def test_before_truncation_rows_have_middles() -> None:
    bins = LengthBins(width=100, max_content=254)
    assert [bins.row(i)["middle"] for i in range(4)] == [49.5, 149.5, 227.0, 255.0]
