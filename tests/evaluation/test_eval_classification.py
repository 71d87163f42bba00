from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.embed import TokenView
from lengthwise.core.errors import DataFormatError
from lengthwise.evaluation.classification import (
    classification_scores,
    evaluate_classification,
    few_shot_indices,
    mteb_undersample_indices,
)
from lengthwise.evaluation.config import ClassificationConfig
from lengthwise.evaluation.data import LabelledTexts, read_classification

from .conftest import TableEncoder


def test_few_shot_draws_k_per_class_seeded() -> None:
    labels = np.asarray([0] * 10 + [1] * 5 + [2] * 7)
    chosen = few_shot_indices(labels, 4, seed=3)
    assert np.bincount(labels[chosen]).tolist() == [4, 4, 4] and len(set(chosen.tolist())) == 12
    assert chosen.tolist() == few_shot_indices(labels, 4, seed=3).tolist()
    assert any(few_shot_indices(labels, 4, seed=s).tolist() != chosen.tolist() for s in range(4, 10))


def test_few_shot_needs_k_examples_in_every_class() -> None:
    with pytest.raises(ValueError, match="few_shot=3: class 1 has 2 training examples, fewer than k"):
        few_shot_indices(np.asarray([0, 0, 0, 1, 1]), 3, seed=0)


def test_scores_known_values() -> None:
    scores = classification_scores(np.asarray([0, 0, 1, 1]), np.asarray([0, 1, 1, 1]))
    assert scores["accuracy"] == 75.0
    assert scores["macro_f1"] == pytest.approx(100 * (2 / 3 + 0.8) / 2)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="classifiers='svm': use one of logreg, mlp"):
        ClassificationConfig(classifiers=("svm",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nothing to run"):
        ClassificationConfig(full=False, few_shot=())
    with pytest.raises(ValueError, match="few_shot_sampler='numpy': use one of seeded, mteb"):
        ClassificationConfig(few_shot_sampler="numpy")  # type: ignore[arg-type]


def test_config_settings_are_enums_and_plain_in_json() -> None:
    from lengthwise.evaluation.config import Classifier, FewShotSampler

    config = ClassificationConfig(classifiers=("mlp", Classifier.logreg), few_shot_sampler="mteb")  # type: ignore[arg-type]
    assert config.classifiers == (Classifier.mlp, Classifier.logreg)
    assert config.few_shot_sampler is FewShotSampler.mteb
    plain = config.to_dict()
    assert plain["classifiers"] == ["mlp", "logreg"] and type(plain["few_shot_sampler"]) is str


class _LabelColumn:
    """Just enough of a `datasets.Dataset` for MTEB's `_undersample_data`: a label column and `select`."""

    def __init__(self, labels: list[int]) -> None:
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, column: str) -> list[int]:
        assert column == "label"
        return self.labels

    def select(self, rows: list[int]) -> _LabelColumn:
        return _LabelColumn([self.labels[row] for row in rows])


@pytest.mark.parametrize(("k", "seed"), [(3, 42), (8, 7)])
def test_mteb_sampler_replays_mteb_undersampling(k: int, seed: int) -> None:
    """Our draws equal MTEB's own `AbsTaskClassification._undersample_data`, experiment by experiment."""
    from types import SimpleNamespace

    from mteb.abstasks.classification import AbsTaskClassification

    labels = np.random.default_rng(0).integers(0, 4, size=60)
    labels[:2] = 4  # a class with fewer than k examples: MTEB takes what there is
    task = SimpleNamespace(seed=seed, samples_per_label=k, label_column_name="label")
    dataset, order, expected = _LabelColumn(labels.tolist()), None, []
    for experiment in range(5):
        _, order, chosen = AbsTaskClassification._undersample_data(task, dataset, experiment, order)  # type: ignore[arg-type]
        expected.append(chosen)
    ours = mteb_undersample_indices(labels, k, 5, seed)
    assert [draw.tolist() for draw in ours] == expected
    assert len({tuple(draw.tolist()) for draw in ours}) == 5  # the compounding shuffles give new draws
    assert np.bincount(labels[ours[0]]).tolist() == [k, k, k, k, 2]


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


def test_texts_are_encoded_once_for_all_classifiers_settings_and_repeats(labelled_folder: Path, tiny_model) -> None:
    train, test = read_classification(labelled_folder)
    encoder = _topic_encoder((train, test))
    config = ClassificationConfig(classifiers=("logreg", "mlp"), few_shot=(1, 2), repeats=4)
    result = evaluate_classification(encoder, train, test, config, view=TokenView(tiny_model))
    assert len(result.runs) == 6 and sum(run["repeats"] for run in result.runs) == 2 * (1 + 4 + 4)
    assert encoder.calls == [("symmetric", len(train)), ("symmetric", len(test))]


def test_mteb_sampler_in_evaluation(labelled_folder: Path) -> None:
    train, test = read_classification(labelled_folder)
    config = ClassificationConfig(full=False, few_shot=(2,), repeats=3, few_shot_sampler="mteb")
    result = evaluate_classification(_topic_encoder((train, test)), train, test, config)
    assert result.runs[0]["repeats"] == 3 and result.scores["accuracy"] == 100.0
    assert result.config["few_shot_sampler"] == "mteb"


def test_label_lists_must_match(labelled_folder: Path) -> None:
    train, test = read_classification(labelled_folder)
    other = LabelledTexts(test.texts, test.labels, ("x", "y"), "mem")
    with pytest.raises(DataFormatError, match="different label names"):
        evaluate_classification(TableEncoder(), train, other)


def test_few_shot_plots_carry_a_std_band(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.axes import Axes

    from lengthwise.evaluation._plots import plot_bins

    bands: list[tuple[list[float], list[float]]] = []
    original = Axes.fill_between

    def spy(self: Axes, x: object, low: list[float], high: list[float], **kwargs: object) -> object:
        bands.append((list(low), list(high)))
        return original(self, x, low, high, **kwargs)

    monkeypatch.setattr(Axes, "fill_between", spy)
    full = [{"bin": "0-99", "count": 3, "accuracy": 80.0}, {"bin": "100-199", "count": 2, "accuracy": 70.0}]
    few = [
        {"bin": "0-99", "count": 3, "accuracy": 60.0, "accuracy_std": 5.0},
        {"bin": "100-199", "count": 2, "accuracy": None, "accuracy_std": None},
    ]
    path = plot_bins({"logreg full": full, "logreg 8-shot": few}, "accuracy", tmp_path / "a.png", title="t")
    assert path.stat().st_size > 0
    assert len(bands) == 1 and bands[0][0][0] == 55.0 and bands[0][1][0] == 65.0
