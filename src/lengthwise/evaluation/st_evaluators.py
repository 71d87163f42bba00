"""The length-binned evaluators as sentence-transformers evaluators, for ``SentenceTransformerTrainer(evaluator=…)``.

Each is a thin adapter over `evaluate_sts` / `evaluate_retrieval` / `evaluate_classification`: it wraps the model
being trained as a `TextEncoder` (or through `encoder_factory`, e.g. a TempScale wrapper with query/document
temperatures), returns flat metrics (headline and per bin, ×100) named ``<name>_<metric>``, and writes the full
result as JSON under `output_path` when one is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

from lengthwise.core.bins import LengthBins
from lengthwise.core.data import PairSet
from lengthwise.core.embed import TokenView
from lengthwise.core.encoder import TextEncoder, as_encoder
from lengthwise.core.results import write_json_atomic
from lengthwise.evaluation.classification import evaluate_classification
from lengthwise.evaluation.config import ClassificationConfig, RetrievalConfig
from lengthwise.evaluation.data import LabelledTexts, RetrievalData
from lengthwise.evaluation.retrieval import evaluate_retrieval
from lengthwise.evaluation.sts import evaluate_sts

__all__ = ["BinnedClassificationEvaluator", "BinnedRetrievalEvaluator", "BinnedSTSEvaluator"]

EncoderFactory = Callable[[Any], TextEncoder]


def _bin_metrics(rows: list[dict[str, Any]], metric: str, prefix: str = "bin") -> dict[str, float]:
    return {
        f"{prefix}_{row['bin'].split(' ')[0]}_{metric}": float(row[metric])
        for row in rows
        if row.get(metric) is not None
    }


class _LengthwiseEvaluator(BaseEvaluator):
    """Shared plumbing: encoder construction, token view, prefixing, JSON output, model-card metrics."""

    task = "task"

    def __init__(
        self,
        name: str,
        *,
        bin_width: int | None = 100,
        batch_size: int = 32,
        encoder_factory: EncoderFactory | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.bin_width = bin_width
        self.batch_size = batch_size
        self.encoder_factory = encoder_factory

    def _encoder_and_view(self, model: Any) -> tuple[TextEncoder, TokenView | None, LengthBins | None]:
        encoder = self.encoder_factory(model) if self.encoder_factory else as_encoder(model)
        if self.bin_width is None:
            return encoder, None, None
        view = TokenView(model)
        return encoder, view, LengthBins.for_view(view, self.bin_width)

    def _finish(
        self,
        model: Any,
        payload: Mapping[str, Any],
        metrics: dict[str, float],
        output_path: str | None,
        epoch: int,
        steps: int,
    ) -> dict[str, float]:
        if output_path is not None:
            suffix = "" if epoch == -1 else f"_epoch{epoch}_steps{steps}"
            write_json_atomic(Path(output_path) / f"{self.task}_{self.name}{suffix}.json", payload)
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics


class BinnedSTSEvaluator(_LengthwiseEvaluator):
    """Spearman/Pearson ×100 of cosine over all pairs and per length bin; primary metric: spearman."""

    task = "sts"

    def __init__(self, pairs: PairSet, name: str = "sts", **options: Any) -> None:
        super().__init__(name, **options)
        self.pairs = pairs
        self.primary_metric = "spearman"

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        encoder, view, bins = self._encoder_and_view(model)
        result = evaluate_sts(encoder, self.pairs, view=view, bins=bins, batch_size=self.batch_size)
        metrics = {key: float(value) for key, value in result.scores.items() if value is not None}
        metrics.update(_bin_metrics(result.bins, "spearman"))
        return self._finish(model, result.to_dict(), metrics, output_path, epoch, steps)


class BinnedRetrievalEvaluator(_LengthwiseEvaluator):
    """nDCG@10, MRR@10, recall@100, MAP@100 (×100) and nDCG@10 per query-length bin; primary: ndcg@10."""

    task = "retrieval"

    def __init__(
        self, data: RetrievalData, name: str = "retrieval", config: RetrievalConfig | None = None, **options: Any
    ) -> None:
        super().__init__(name, **options)
        self.data = data
        self.config = config or RetrievalConfig()
        self.primary_metric = f"ndcg@{self.config.ndcg_k}"

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        encoder, view, bins = self._encoder_and_view(model)
        result = evaluate_retrieval(encoder, self.data, self.config, view=view, bins=bins, batch_size=self.batch_size)
        metrics = dict(result.scores)
        metrics.update(_bin_metrics(result.query_bins, self.primary_metric, prefix="query_bin"))
        metrics.update(_bin_metrics(result.document_bins, f"recall@{self.config.recall_k}", prefix="doc_bin"))
        return self._finish(model, result.to_dict(), metrics, output_path, epoch, steps)


class BinnedClassificationEvaluator(_LengthwiseEvaluator):
    """Accuracy and macro-F1 ×100 of the first configured run, per run and per bin; primary: accuracy."""

    task = "classification"

    def __init__(
        self,
        train: LabelledTexts,
        test: LabelledTexts,
        name: str = "classification",
        config: ClassificationConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        self.train, self.test = train, test
        self.config = config or ClassificationConfig()
        self.primary_metric = "accuracy"

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        encoder, view, bins = self._encoder_and_view(model)
        result = evaluate_classification(
            encoder, self.train, self.test, self.config, view=view, bins=bins, batch_size=self.batch_size
        )
        metrics = dict(result.scores)
        for run in result.runs:
            tag = f"{run['classifier']}_{run['setting']}"
            metrics.update({f"{tag}_{key}": value for key, value in run["scores"].items() if not key.endswith("_std")})
            metrics.update(_bin_metrics(run.get("bins", []), "accuracy", prefix=f"{tag}_bin"))
        return self._finish(model, result.to_dict(), metrics, output_path, epoch, steps)
