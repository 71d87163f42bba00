from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lengthwise.embed import TokenView
from lengthwise.evaluation.classification import (
    ClassificationConfig,
    classification_scores,
    evaluate_classification,
    few_shot_indices,
)
from lengthwise.evaluation.data import LabelledTexts, read_classification

from .conftest import TableEncoder


def test_few_shot_draws_k_per_class_seeded() -> None:
    labels = np.asarray([0] * 10 + [1] * 5 + [2] * 7)
    chosen = few_shot_indices(labels, 4, seed=3)
    assert np.bincount(labels[chosen]).tolist() == [4, 4, 4] and len(set(chosen.tolist())) == 12
    assert chosen.tolist() == few_shot_indices(labels, 4, seed=3).tolist()
    assert any(few_shot_indices(labels, 4, seed=s).tolist() != chosen.tolist() for s in range(4, 10))


def test_few_shot_needs_k_examples_in_every_class() -> None:
    with pytest.raises(ValueError, match="class 1 has 2 training examples, fewer than k = 3"):
        few_shot_indices(np.asarray([0, 0, 0, 1, 1]), 3, seed=0)


def test_scores_known_values() -> None:
    scores = classification_scores(np.asarray([0, 0, 1, 1]), np.asarray([0, 1, 1, 1]))
    assert scores["accuracy"] == 75.0
    assert scores["macro_f1"] == pytest.approx(100 * (2 / 3 + 0.8) / 2)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="classifiers must be among logreg, mlp"):
        ClassificationConfig(classifiers=("svm",))
    with pytest.raises(ValueError, match="nothing to run"):
        ClassificationConfig(full=False, few_shot=())


def _topic_encoder(data: tuple[LabelledTexts, LabelledTexts]) -> TableEncoder:
    """Separable embeddings: the class direction plus a little per-text noise."""
    rng = np.random.default_rng(0)
    table = {}
    for part in data:
        for text, label in zip(part.texts, part.labels.tolist(), strict=True):
            table[text] = np.eye(4)[label] * 3 + rng.normal(scale=0.3, size=4)
    return TableEncoder(table)


def test_separable_classes_are_learned_full_and_few_shot(labelled_folder: Path, tiny_model) -> None:
    train, test = read_classification(labelled_folder)
    config = ClassificationConfig(classifiers=("logreg", "mlp"), few_shot=(2,), repeats=3)
    result = evaluate_classification(_topic_encoder((train, test)), train, test, config, view=TokenView(tiny_model))
    assert result.scores == {"accuracy": 100.0, "macro_f1": 100.0}
    assert [(r["classifier"], r["setting"], r["repeats"]) for r in result.runs] == [
        ("logreg", "full", 1),
        ("logreg", "2-shot", 3),
        ("mlp", "full", 1),
        ("mlp", "2-shot", 3),
    ]
    few = result.runs[1]
    assert few["scores"]["accuracy"] == 100.0 and few["scores"]["accuracy_std"] == 0.0
    assert sum(row["count"] for row in few["bins"]) == len(test)
    assert result.to_dict()["n_train"] == 12


def test_label_lists_must_match(labelled_folder: Path) -> None:
    train, test = read_classification(labelled_folder)
    other = LabelledTexts(test.texts, test.labels, ("x", "y"), "mem")
    with pytest.raises(ValueError, match="different label names"):
        evaluate_classification(TableEncoder(), train, other)
