from __future__ import annotations

import numpy as np
import pytest

from lengthwise.core.bins import LengthBins
from lengthwise.core.data import PairSet, TextPair
from lengthwise.core.embed import TokenView
from lengthwise.evaluation.sts import correlations, evaluate_sts

from .conftest import TableEncoder


def test_correlations_known_values() -> None:
    gold = np.asarray([1.0, 2.0, 3.0, 4.0])
    assert correlations(np.asarray([0.1, 0.2, 0.5, 0.9]), gold)["spearman"] == pytest.approx(100.0)
    assert correlations(-gold, gold) == pytest.approx({"spearman": -100.0, "pearson": -100.0})
    assert correlations(gold[:2], gold[:2]) == {"spearman": None, "pearson": None}


def _pairs() -> PairSet:
    # cosines: 1.0, 0.6, 0.0 (unit vectors at angles 0°, ~53°, 90° from e1)
    return PairSet(
        (
            TextPair("a", "a2", 5.0, "x"),
            TextPair("a", "b", 3.0, "x"),
            TextPair("a", "c", 0.5, "y"),
            TextPair("c", "b", 1.0, "y"),
        ),
        "mem",
        "test",
    )


def test_evaluate_sts_pools_subsets_and_scores_each() -> None:
    encoder = TableEncoder({"a": [1, 0], "a2": [2, 0], "b": [0.6, 0.8], "c": [0, 1]})
    result = evaluate_sts(encoder, _pairs())
    # cosines 1, .6, 0, .8 against gold 5, 3, .5, 1: one swap (c-b above a-b) in 4 items
    assert result.scores["spearman"] == pytest.approx(80.0)
    assert result.subsets["x"]["n_pairs"] == 2 and result.subsets["x"]["spearman"] is None
    assert encoder.calls == [("symmetric", 4)]  # each distinct text once, symmetric side
    assert result.bins == []


def test_evaluate_sts_bins_by_the_longer_text(tiny_model) -> None:
    long = "many words " * 40  # 80 tokens
    pairs = PairSet(
        tuple(TextPair(f"short {i}", long if i % 2 else f"tiny {i}", float(i)) for i in range(8)), "mem", "test"
    )
    view = TokenView(tiny_model)
    result = evaluate_sts(TableEncoder(), pairs, view=view, bins=LengthBins(width=50, max_content=62))
    assert [(row["bin"], row["count"]) for row in result.bins] == [("0-49", 4), ("50-62", 0), (">62 (truncated)", 4)]
    assert result.to_dict()["bins"]["by"] == "longer text of the pair"
