"""The sentence-transformers evaluator adapters on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

from sentence_transformers.base.evaluation import BaseEvaluator, SequentialEvaluator

from lengthwise.core.data import PairSet, TextPair
from lengthwise.core.encoder import as_encoder
from lengthwise.evaluation.config import ClassificationConfig
from lengthwise.evaluation.data import read_beir, read_classification
from lengthwise.evaluation.st_evaluators import (
    BinnedClassificationEvaluator,
    BinnedRetrievalEvaluator,
    BinnedSTSEvaluator,
)


def _pairs() -> PairSet:
    texts = ["a cat", "a dog", "the sun is hot", "rain falls", "stocks fell", "markets rose"]
    return PairSet(tuple(TextPair(t, texts[i - 1], float(i)) for i, t in enumerate(texts)), "mem", "test")


def test_sts_evaluator_metrics_prefix_and_json(tiny_model, tmp_path: Path) -> None:
    evaluator = BinnedSTSEvaluator(_pairs(), name="toy", bin_width=10)
    assert isinstance(evaluator, BaseEvaluator)
    metrics = evaluator(tiny_model, output_path=str(tmp_path), epoch=1, steps=5)
    assert evaluator.primary_metric == "toy_spearman" and "toy_spearman" in metrics
    assert "toy_bin_0-9_spearman" in metrics
    written = json.loads((tmp_path / "sts_toy_epoch1_steps5.json").read_text())
    assert written["n_pairs"] == 6


def test_encoder_factory_is_used(tiny_model) -> None:
    seen = []

    def factory(model):
        seen.append(model)
        return as_encoder(model)

    BinnedSTSEvaluator(_pairs(), encoder_factory=factory, bin_width=None)(tiny_model)
    assert seen == [tiny_model]


def test_retrieval_and_classification_evaluators_in_sequence(
    tiny_model, beir_folder: Path, labelled_folder: Path
) -> None:
    train, test = read_classification(labelled_folder)
    sequence = SequentialEvaluator(
        [
            BinnedRetrievalEvaluator(read_beir(beir_folder), name="beir"),
            BinnedClassificationEvaluator(
                train, test, name="topics", config=ClassificationConfig(few_shot=(2,), repeats=2)
            ),
        ]
    )
    metrics = sequence(tiny_model)
    assert {"beir_ndcg@10", "beir_recall@100", "topics_accuracy", "topics_logreg_2-shot_macro_f1"} <= set(metrics)
    assert any(key.startswith("beir_query_bin_") for key in metrics)
