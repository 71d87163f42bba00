"""What the other rooms' tuners maximise: this room's scores, on any `TextEncoder` or on rankings (the junction,
`lengthwise.pipelines`, hands them over).

- `dev_objective`: a task's dev score of an encoder (STS Spearman, retrieval nDCG@10, classification accuracy on a
  stratified half of train), for ``lengthwise tempscale tune`` and ``lengthwise longdoc tune``;
- `qrels_objective`: nDCG@10 of a ranker's rankings against a BEIR split's qrels, for ``lengthwise index tune``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lengthwise.core.encoder import TextEncoder
    from lengthwise.evaluation.config import RetrievalConfig, Task
    from lengthwise.evaluation.data import RetrievalData

__all__ = ["dev_objective", "qrels_objective"]

Ranking = Sequence[tuple[str, float]]  # (document id, score), best first


def dev_objective(
    task: Task,
    data: str | os.PathLike[str],
    split: str = "dev",
    *,
    batch_size: int = 32,
    max_items: int | None = None,
    seed: int = 0,
    retrieval: RetrievalConfig | None = None,
) -> tuple[Callable[[TextEncoder], float], dict[str, Any]]:
    """(the score of an encoder on `task`'s dev data, a description of that data), the data read once.

    STS: Spearman on the (seeded sample of `max_items`) pairs of `data` (nan where it is undefined); retrieval:
    nDCG@10 on the BEIR `split` (`retrieval` settings; default: self-hits dropped as MTEB does for this data set);
    classification: accuracy of a classifier fit on one stratified half of train and scored on the other (the test
    split is never read).
    """
    from lengthwise import evaluation as ev
    from lengthwise.evaluation.config import Task
    from lengthwise.evaluation.tasks import drops_self_hits

    if task is Task.sts:
        pairs = ev.read_sts(data)
        pairs = pairs.sample(max_items, seed) if max_items else pairs

        def sts(encoder: TextEncoder) -> float:
            score = ev.evaluate_sts(encoder, pairs, batch_size=batch_size).scores["spearman"]
            return float("nan") if score is None else score

        return sts, {"source": pairs.source, "n_pairs": len(pairs), "sha256": pairs.sha256}
    if task is Task.retrieval:
        beir = _judging_some_relevant(ev.read_beir(data, split), data, split)
        settings = retrieval or ev.RetrievalConfig(drop_self_hits=drops_self_hits("auto", Path(data)))

        def ndcg(encoder: TextEncoder) -> float:
            return ev.evaluate_retrieval(encoder, beir, settings, batch_size=batch_size).scores["ndcg@10"]

        return ndcg, dict(beir.describe())
    return _classification_objective(data, batch_size=batch_size, max_items=max_items, seed=seed)


def _classification_objective(
    data: str | os.PathLike[str], *, batch_size: int, max_items: int | None, seed: int
) -> tuple[Callable[[TextEncoder], float], dict[str, Any]]:
    from sklearn.model_selection import train_test_split

    from lengthwise import evaluation as ev

    train, _ = ev.read_classification(data)  # the test split is never looked at while tuning
    train = train.stratified_sample(max_items, seed) if max_items else train
    fit, dev = train_test_split(range(len(train)), test_size=0.5, random_state=seed, stratify=train.labels)
    fit_set, dev_set = train.subset(sorted(fit), "tune: fit half"), train.subset(sorted(dev), "tune: dev half")
    classifier = ev.ClassificationConfig(few_shot=(), seed=seed)

    def accuracy(encoder: TextEncoder) -> float:
        return ev.evaluate_classification(encoder, fit_set, dev_set, classifier, batch_size=batch_size).scores[
            "accuracy"
        ]

    return accuracy, {"train": train.describe(), "dev": "a stratified half of train (the other half fits)"}


def qrels_objective(
    data: str | os.PathLike[str], split: str, doc_ids: Sequence[str]
) -> tuple[list[str], Callable[[Sequence[Ranking]], float]]:
    """(the judged queries of a BEIR `split`, the mean nDCG@10 ×100 of one ranking per query against its qrels), for
    a ranker over the same corpus: `doc_ids` must be `data`'s documents (`SettingError` on ``data`` otherwise), and
    the qrels must judge some document relevant (`DataFormatError` otherwise). A query with nothing found scores 0."""
    from lengthwise.core.errors import SettingError
    from lengthwise.evaluation.config import RetrievalConfig
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.retrieval import trec_scores

    corpus = _judging_some_relevant(read_beir(Path(data), split), data, split)
    if set(corpus.doc_ids) != set(doc_ids):
        raise SettingError("data", str(data), "holds other documents than the index; tune on the indexed corpus")
    asked = [(q, t) for q, t in zip(corpus.query_ids, corpus.query_texts, strict=True) if q in corpus.qrels]

    def ndcg(rankings: Sequence[Ranking]) -> float:
        run = {q: dict(ranking) for (q, _), ranking in zip(asked, rankings, strict=True)}
        per_query = trec_scores({q: corpus.qrels[q] for q in run}, run, RetrievalConfig())
        return round(100 * sum(row["ndcg@10"] for row in per_query.values()) / len(asked), 4)

    return [t for _, t in asked], ndcg


def _judging_some_relevant(beir: RetrievalData, data: str | os.PathLike[str], split: str) -> RetrievalData:
    """`beir`, unless its qrels judge no document relevant (every score 0 or below): then every choice a tuner
    compares would score 0 and the first would be chosen in silence, so a `DataFormatError` naming the qrels file."""
    from lengthwise.core.errors import DataFormatError
    from lengthwise.evaluation.data import _existing

    if any(score > 0 for judged in beir.qrels.values() for score in judged.values()):
        return beir
    qrels = _existing(Path(data) / "qrels", f"{split}.tsv") or Path(data) / "qrels" / f"{split}.tsv"
    raise DataFormatError(None, None, f"{qrels}: judges no document relevant; nothing to tune on (every score is 0 "
                          "or below); give the relevant documents a score of 1 or more")  # fmt: skip
