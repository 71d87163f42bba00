"""The shape of ``results.json`` (what `lengthwise eval` writes), as TypedDicts — as mteb types its results.

A record (`EvalRecord`, tagged by `task`) is the headline (`task`, `scores`, the per-bin table `bins`,
`bin_spec`), the task's full `result` (`STSRecord`, `RetrievalRecord` or `ClassificationRecord`) and the
provenance every lengthwise record carries (`lengthwise.core.results.Provenance`: model, data, settings,
created, wall time, environment). Per-bin rows are ``{"bin": label, "count": n, <metric>: value, ...}``; a
metric is None where a bin has too few items.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from lengthwise.core.results import Provenance

__all__ = [
    "BinRow",
    "ClassificationEvalRecord",
    "ClassificationRecord",
    "ClassificationRun",
    "EvalRecord",
    "QueryDocumentBins",
    "RetrievalBinTables",
    "RetrievalEvalRecord",
    "RetrievalRecord",
    "STSBinTable",
    "STSEvalRecord",
    "STSRecord",
    "Scores",
]

Scores = dict[str, float | None]  # metric name → value ×100 (None: undefined, e.g. a constant prediction)
BinRow = dict[str, Any]  # {"bin": "0-99", "count": 12, "spearman": 81.2, ...}; see `lengthwise.core.bins.per_bin`


class STSBinTable(TypedDict):
    by: str  # what a pair's length is: the longer of its two texts
    spec: dict[str, Any] | None
    rows: list[BinRow]


class STSRecord(TypedDict):
    """`STSResult.to_dict()`: Spearman/Pearson over all pairs, per subset (a pair's kind) and per bin."""

    scores: Scores
    n_pairs: int
    subsets: dict[str, dict[str, Any]]
    bins: STSBinTable


class _Rows(TypedDict):
    by: str
    rows: list[BinRow]


class RetrievalBinTables(TypedDict):
    spec: dict[str, Any] | None
    queries: _Rows  # by query length; metrics are means over the bin's queries
    documents: _Rows  # by relevant document length; one item per (query, relevant document) judgement


class RetrievalRecord(TypedDict):
    """`RetrievalResult.to_dict()`: means ×100 over judged queries, the two bin tables, config and timings."""

    scores: Scores
    n_queries: int
    n_documents: int
    config: dict[str, Any]
    timings_s: dict[str, float]
    bins: RetrievalBinTables


class _RunRequired(TypedDict):
    classifier: str
    setting: str  # "full" or "<k>-shot"
    k_per_class: int | None
    repeats: int
    scores: dict[str, float]  # accuracy, macro_f1 (and *_std over few-shot repeats)


class ClassificationRun(_RunRequired, total=False):
    """One (classifier, setting) run; `bins` only when the texts were binned."""

    bins: list[BinRow]


class ClassificationRecord(TypedDict):
    """`ClassificationResult.to_dict()`: the headline (the first run) and every run."""

    scores: dict[str, float]
    runs: list[ClassificationRun]
    n_train: int
    n_test: int
    bin_spec: dict[str, Any] | None
    config: dict[str, Any]


class QueryDocumentBins(TypedDict):
    """Retrieval's headline bin tables: by query length and by relevant document length."""

    queries: list[BinRow]
    documents: list[BinRow]


class _Record(Provenance):
    scores: Scores
    bin_spec: dict[str, Any]


class STSEvalRecord(_Record):
    """``results.json`` of an STS run; `bins` are the rows of `result["bins"]`."""

    task: Literal["sts"]
    bins: list[BinRow]
    result: STSRecord


class RetrievalEvalRecord(_Record):
    """``results.json`` of a retrieval run; `bins` holds the query and the document rows."""

    task: Literal["retrieval"]
    bins: QueryDocumentBins
    result: RetrievalRecord


class ClassificationEvalRecord(_Record):
    """``results.json`` of a classification run; `bins` are the first run's rows."""

    task: Literal["classification"]
    bins: list[BinRow]
    result: ClassificationRecord


EvalRecord = STSEvalRecord | RetrievalEvalRecord | ClassificationEvalRecord  # tagged by "task"
