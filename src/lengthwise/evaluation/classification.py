"""Classification on frozen embeddings: MTEB-style logistic regression and a small MLP, full and few-shot.

MTEB fits ``LogisticRegression(max_iter=100)`` on raw embeddings of an undersampled train split (k per class,
10 experiments) and reports mean accuracy and macro-F1 on the test split. Here the same classifier runs on the
whole train set ("full") and on k examples per class drawn afresh for each of `repeats` seeded repeats — drawn
with numpy's `default_rng(seed + r)` (``few_shot_sampler="seeded"``) or exactly as MTEB draws them
(``"mteb"``: `mteb_undersample_indices`). Train and test texts are encoded once per call; every classifier,
setting and repeat reuses those embeddings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lengthwise.core.bins import LengthBins, per_bin, token_lengths
from lengthwise.core.embed import TokenView
from lengthwise.core.encoder import TextEncoder
from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.evaluation.config import ClassificationConfig, Classifier, FewShotSampler
from lengthwise.evaluation.data import LabelledTexts
from lengthwise.evaluation.schema import ClassificationRecord, ClassificationRun

__all__ = [
    "CLASSIFIERS",
    "ClassificationResult",
    "classification_scores",
    "evaluate_classification",
    "few_shot_indices",
    "fit_predict",
    "mteb_undersample_indices",
]

CLASSIFIERS = tuple(c.value for c in Classifier)  # kept for callers of the flat API
SAMPLERS = tuple(s.value for s in FewShotSampler)


def few_shot_indices(labels: np.ndarray, k: int, seed: int) -> np.ndarray:
    """k indices per class, drawn without replacement (seeded), sorted: (k * C,) int.

    Raises ValueError naming a class with fewer than k examples.
    """
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        if len(members) < k:
            raise SettingError(
                "few_shot", k, f"class {label} has {len(members)} training examples, fewer than k; use a smaller k"
            )
        chosen.append(rng.choice(members, size=k, replace=False))
    return np.sort(np.concatenate(chosen))


def mteb_undersample_indices(labels: np.ndarray, k: int, n_experiments: int, seed: int = 42) -> list[np.ndarray]:
    """The train rows MTEB's `AbsTaskClassification` fits on in each of its `n_experiments` (mteb 2.x and 1.x).

    MTEB shuffles one index list with a fresh ``RandomState(seed)`` before every experiment — so the shuffles
    compound — and keeps the first k rows of each label in shuffled order (fewer when a class is smaller).
    The draws depend on the row order of the train split, so they equal MTEB's only for MTEB's row order.
    """
    order = list(range(len(labels)))
    draws = []
    for _ in range(n_experiments):
        np.random.RandomState(seed).shuffle(order)  # MTEB's own legacy generator, on purpose
        taken: dict[Any, int] = {}
        chosen = []
        for row in order:
            label = labels[row].item()
            if taken.get(label, 0) < k:
                chosen.append(row)
                taken[label] = taken.get(label, 0) + 1
        draws.append(np.asarray(chosen, dtype=np.int64))
    return draws


def _few_shot_draws(labels: np.ndarray, k: int, config: ClassificationConfig) -> list[tuple[int, np.ndarray]]:
    """(classifier seed, train rows) for each repeat of the k-shot setting."""
    seeds = [config.seed + r for r in range(config.repeats)]
    if config.few_shot_sampler is FewShotSampler.mteb:
        return list(zip(seeds, mteb_undersample_indices(labels, k, config.repeats, config.seed), strict=True))
    return [(seed, few_shot_indices(labels, k, seed)) for seed in seeds]


def _classifier(name: Classifier | str, config: ClassificationConfig, seed: int) -> Any:
    if Classifier(name) is Classifier.logreg:
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(max_iter=config.max_iter)
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(hidden_layer_sizes=config.mlp_hidden, max_iter=config.mlp_max_iter, random_state=seed)


def fit_predict(
    train: np.ndarray,
    train_labels: np.ndarray,
    test: np.ndarray,
    name: Classifier | str,
    config: ClassificationConfig,
    seed: int,
) -> np.ndarray:
    """Fit classifier `name` on (n, D) train embeddings and predict (m, D) test embeddings: (m,) labels."""
    from sklearn.exceptions import ConvergenceWarning

    model = _classifier(name, config, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter=100 is MTEB's protocol, not an accident
        model.fit(train, train_labels)
    return np.asarray(model.predict(test))


def classification_scores(truth: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Accuracy and macro-F1 ×100 (macro over the classes present in `truth` or `predicted`)."""
    from sklearn.metrics import accuracy_score, f1_score

    return {
        "accuracy": 100.0 * float(accuracy_score(truth, predicted)),
        "macro_f1": 100.0 * float(f1_score(truth, predicted, average="macro", zero_division=0)),
    }


def _summarise(per_repeat: list[dict[str, float]]) -> dict[str, float]:
    summary: dict[str, float] = {}
    for name in per_repeat[0]:
        values = np.asarray([scores[name] for scores in per_repeat])
        summary[name] = round(float(values.mean()), 4)
        if len(values) > 1:
            summary[f"{name}_std"] = round(float(values.std(ddof=1)), 4)
    return summary


def _bin_scorer(truth: np.ndarray, predictions: list[np.ndarray]) -> Callable[[np.ndarray], dict[str, float | None]]:
    """Scores of the items selected by a (m,) bool mask, averaged over repeats (one prediction array each)."""

    def score(mask: np.ndarray) -> dict[str, float | None]:
        return dict(_summarise([classification_scores(truth[mask], p[mask]) for p in predictions]))

    return score


@dataclass(frozen=True)
class ClassificationResult:
    """Headline scores ×100 (the first run), every (classifier, setting) run with its per-bin table."""

    scores: dict[str, float]
    runs: list[ClassificationRun]
    n_train: int
    n_test: int
    bin_spec: dict[str, Any] | None
    config: dict[str, Any]

    def to_dict(self) -> ClassificationRecord:
        return {
            "scores": dict(self.scores),
            "runs": list(self.runs),
            "n_train": self.n_train,
            "n_test": self.n_test,
            "bin_spec": self.bin_spec,
            "config": dict(self.config),
        }


def evaluate_classification(
    encoder: TextEncoder,
    train: LabelledTexts,
    test: LabelledTexts,
    config: ClassificationConfig | None = None,
    *,
    view: TokenView | None = None,
    bins: LengthBins | None = None,
    batch_size: int = 32,
    show_progress: bool = False,
) -> ClassificationResult:
    """Embed train and test once, run every (classifier, setting); bin test texts by length when `view` is given.

    The headline `scores` are the first run (logreg on the full train set by default). Per-bin scores of a
    few-shot setting are means over its repeats.
    """
    config = config or ClassificationConfig()
    if train.label_names != test.label_names:
        problem = "train and test have different label names; read them with one label list"
        raise DataFormatError(None, None, problem)
    train_embeddings = encoder.encode(train.texts, batch_size=batch_size, show_progress=show_progress)  # (n, D)
    test_embeddings = encoder.encode(test.texts, batch_size=batch_size, show_progress=show_progress)  # (m, D)
    test_bins = None
    if view is not None:
        bins = bins or LengthBins.for_view(view)
        test_bins = bins.assign(token_lengths(view, test.texts))
    settings: list[tuple[str, int | None]] = ([("full", None)] if config.full else []) + [
        (f"{k}-shot", k) for k in config.few_shot
    ]
    runs: list[ClassificationRun] = []
    for name in config.classifiers:
        for setting, k in settings:
            draws = [(config.seed, np.arange(len(train)))] if k is None else _few_shot_draws(train.labels, k, config)
            predictions = [
                fit_predict(train_embeddings[rows], train.labels[rows], test_embeddings, name, config, seed)
                for seed, rows in draws
            ]
            run: ClassificationRun = {
                "classifier": name.value,
                "setting": setting,
                "k_per_class": k,
                "repeats": len(draws),
                "scores": _summarise([classification_scores(test.labels, p) for p in predictions]),
            }
            if test_bins is not None and bins is not None:
                run["bins"] = per_bin(bins, test_bins, _bin_scorer(test.labels, predictions))
            runs.append(run)
    headline = runs[0]["scores"]
    return ClassificationResult(
        scores={"accuracy": headline["accuracy"], "macro_f1": headline["macro_f1"]},
        runs=runs,
        n_train=len(train),
        n_test=len(test),
        bin_spec=bins.describe() if (test_bins is not None and bins is not None) else None,
        config=config.to_dict(),
    )
