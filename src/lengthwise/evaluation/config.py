"""Evaluation settings: frozen dataclasses validated on construction, and `str` Enums for every fixed value set.

Each field documents itself in ``metadata["help"]``; `lengthwise eval` reads its flags' help and defaults from
here (`lengthwise.cli.options.field_option`), so the library and the command line cannot drift apart. Errors
name the field. Importing this module loads neither torch nor numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from lengthwise.core.errors import SettingError, enum_member

__all__ = [
    "ClassificationConfig",
    "Classifier",
    "EvalConfig",
    "FewShotSampler",
    "RetrievalConfig",
    "SelfHits",
    "Task",
]


class Task(str, Enum):
    """An evaluation task; its value is the name used on the command line and in ``results.json``."""

    sts = "sts"
    retrieval = "retrieval"
    classification = "classification"

    @property
    def metric(self) -> str:
        """The headline metric (×100): Spearman for STS, nDCG@10 for retrieval, accuracy for classification."""
        return _METRICS[self]


_METRICS = {Task.sts: "spearman", Task.retrieval: "ndcg@10", Task.classification: "accuracy"}


class Classifier(str, Enum):
    """A classifier fitted on frozen embeddings."""

    logreg = "logreg"  # MTEB's LogisticRegression(max_iter=100)
    mlp = "mlp"  # sklearn's MLPClassifier, one hidden layer


class FewShotSampler(str, Enum):
    """How the k examples per class of a few-shot repeat are drawn."""

    seeded = "seeded"  # numpy default_rng(seed + repeat), k per class without replacement
    mteb = "mteb"  # exactly MTEB's undersampling (compounding RandomState(seed) shuffles)


class SelfHits(str, Enum):
    """Whether a retrieved document whose id equals the query id counts (MTEB's ``ignore_identical_ids``)."""

    auto = "auto"  # follow the task: drop for the MTEB tasks that set ignore_identical_ids, else keep
    keep = "keep"  # MTEB's default
    drop = "drop"  # ArguAna, Quora, MS MARCO, FiQA, FEVER… in MTEB: their queries are corpus documents


@dataclass(frozen=True)
class RetrievalConfig:
    """Cut-offs and chunk sizes of exact dense retrieval. `top_k` documents are kept per query (≥ every cut-off)."""

    top_k: int = field(default=100, metadata={"help": "Retrieval: documents kept per query (≥ every cut-off)."})
    ndcg_k: int = field(default=10, metadata={"help": "Retrieval: nDCG cut-off."})
    mrr_k: int = field(default=10, metadata={"help": "Retrieval: MRR cut-off."})
    recall_k: int = field(default=100, metadata={"help": "Retrieval: recall cut-off."})
    map_k: int = field(default=100, metadata={"help": "Retrieval: MAP cut-off."})
    query_chunk: int = field(default=256, metadata={"help": "Retrieval: queries searched at once."})
    corpus_chunk: int = field(default=16384, metadata={"help": "Retrieval: corpus rows scored at once."})
    drop_self_hits: bool = field(
        default=False,
        metadata={"help": "Retrieval: never retrieve the document whose id is the query id (MTEB: per task)."},
    )

    def __post_init__(self) -> None:
        cutoffs = (self.ndcg_k, self.mrr_k, self.recall_k, self.map_k)
        for name in ("ndcg_k", "mrr_k", "recall_k", "map_k", "query_chunk", "corpus_chunk"):
            if getattr(self, name) < 1:
                raise SettingError(name, getattr(self, name), "must be ≥ 1")
        if self.top_k < max(cutoffs):
            raise SettingError("top_k", self.top_k, f"must be ≥ every cut-off (largest: {max(cutoffs)})")

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class ClassificationConfig:
    """Which classifiers, which settings (full train set and/or k per class), repeats and seed."""

    classifiers: tuple[Classifier, ...] = field(
        default=(Classifier.logreg,), metadata={"help": "Classification: logreg and/or mlp (repeatable)."}
    )
    full: bool = field(default=True, metadata={"help": "Classification: fit on the full train set (--no-full: skip)."})
    few_shot: tuple[int, ...] = field(
        default=(8,), metadata={"help": "Classification: k examples per class (repeatable)."}
    )
    repeats: int = field(default=10, metadata={"help": "Classification: few-shot repeats."})
    max_iter: int = field(default=100, metadata={"help": "Classification: logistic regression iterations (MTEB: 100)."})
    mlp_hidden: tuple[int, ...] = field(default=(256,), metadata={"help": "Classification: MLP hidden layer sizes."})
    mlp_max_iter: int = field(default=300, metadata={"help": "Classification: MLP iterations."})
    seed: int = field(default=42, metadata={"help": "Seed for sampling and classifiers."})
    few_shot_sampler: FewShotSampler = field(
        default=FewShotSampler.seeded,
        metadata={"help": "Classification: 'seeded' (per-repeat seed) or 'mteb' (MTEB's draws)."},
    )

    def __post_init__(self) -> None:
        if not self.classifiers:
            raise SettingError("classifiers", [], "name at least one of logreg, mlp")
        chosen = tuple(enum_member(Classifier, "classifiers", name) for name in self.classifiers)
        object.__setattr__(self, "classifiers", chosen)
        object.__setattr__(self, "few_shot", tuple(self.few_shot))
        sampler = enum_member(FewShotSampler, "few_shot_sampler", self.few_shot_sampler)
        object.__setattr__(self, "few_shot_sampler", sampler)
        if not self.full and not self.few_shot:
            raise SettingError("few_shot", [], "nothing to run: enable the full setting or give a few-shot k")
        if any(k < 1 for k in self.few_shot):
            raise SettingError("few_shot", list(self.few_shot), "every k must be ≥ 1")
        for name in ("repeats", "max_iter"):
            if getattr(self, name) < 1:
                raise SettingError(name, getattr(self, name), "must be ≥ 1")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (enum members as their names)."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values["classifiers"] = [c.value for c in self.classifiers]
        values["few_shot_sampler"] = self.few_shot_sampler.value
        return values


@dataclass(frozen=True)
class EvalConfig:
    """One `lengthwise eval` run: the task, its data, length bins, sampling and the task's own settings."""

    task: Task = field(metadata={"help": "sts, retrieval or classification."})
    data: str = field(
        metadata={
            "help": "STS file or SentEval folder; BEIR folder; folder with train/test.jsonl; or hf:NAME (online)."
        }
    )
    split: str = field(default="test", metadata={"help": "Retrieval qrels split / hub test split."})
    train: Path | None = field(
        default=None, metadata={"help": "Classification: train JSONL when --data is the test JSONL."}
    )
    bin_width: int = field(default=100, metadata={"help": "Width of a token-length bin."})
    batch_size: int = field(default=32, metadata={"help": "Texts per forward pass."})
    seed: int = field(default=42, metadata={"help": "Seed for sampling and classifiers."})
    max_train: int | None = field(default=2000, metadata={"help": "Classification: stratified train sample."})
    max_test: int | None = field(default=2000, metadata={"help": "Classification: stratified test sample."})
    self_hits: SelfHits = field(
        default=SelfHits.auto,
        metadata={
            "help": "Retrieval: a retrieved document whose id is the query id — keep (MTEB's default), drop, or "
            "auto: drop for the MTEB tasks that ask for it (ArguAna, Quora, MS MARCO, FiQA, FEVER…), by data name."
        },
    )
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    classification: ClassificationConfig = field(default_factory=ClassificationConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "task", enum_member(Task, "task", self.task))
        object.__setattr__(self, "self_hits", enum_member(SelfHits, "self_hits", self.self_hits))
        if not str(self.data).strip():
            raise SettingError("data", self.data, "name a file, a folder or hf:NAME")
        for name in ("bin_width", "batch_size"):
            if getattr(self, name) < 1:
                raise SettingError(name, getattr(self, name), "must be ≥ 1")
        for name in ("max_train", "max_test"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SettingError(name, value, "must be ≥ 1")

    def settings(self) -> dict[str, Any]:
        """The record's ``settings``: what `results.json` has always held, plus the task's own section."""
        settings: dict[str, Any] = {
            "bin_width": self.bin_width,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "split": self.split,
        }
        if self.task is Task.classification:
            settings.update(
                classification=self.classification.to_dict(), sample={"train": self.max_train, "test": self.max_test}
            )
        elif self.task is Task.retrieval:
            settings.update(retrieval=self.retrieval.to_dict(), self_hits=self.self_hits.value)
        return settings
