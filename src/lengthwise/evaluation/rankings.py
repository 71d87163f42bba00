"""Retrieval scored on rankings made elsewhere (`lengthwise eval --index`: a long-document index ranks, this room
scores): the headline scores of each ranking, their overlap, and the ``results.json`` record.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lengthwise.evaluation.config import EvalConfig, RetrievalConfig
    from lengthwise.evaluation.data import RetrievalData
    from lengthwise.evaluation.schema import EvalRecord

__all__ = ["index_record", "index_task", "ranking_scores"]

Ranking = Sequence[tuple[str, float]]  # (document id, score), best first


def ranking_scores(
    runs: Mapping[str, Sequence[Ranking]], data: RetrievalData, settings: RetrievalConfig
) -> tuple[dict[str, dict[str, float]], float]:
    """The headline scores (×100, 4 decimals) of each ranking in `runs` (one ranking per query of `data`), and the
    mean share of the ``exact`` run's top-k documents that the ``index`` run also returns (k = ``settings.top_k``)."""
    import numpy as np

    from lengthwise.evaluation.retrieval import trec_scores

    scores, tops = {}, {}
    for name, hits in runs.items():
        run = {qid: {doc: score for doc, score in row if not (settings.drop_self_hits and doc == qid)}
               for qid, row in zip(data.query_ids, hits, strict=True) if qid in data.qrels}  # fmt: skip
        per_query = trec_scores({qid: data.qrels[qid] for qid in run}, run, settings)
        names = list(next(iter(per_query.values())))
        scores[name] = {m: round(100 * float(np.mean([row[m] for row in per_query.values()])), 4) for m in names}
        tops[name] = {q: sorted(docs, key=docs.__getitem__, reverse=True)[: settings.top_k] for q, docs in run.items()}
    shares = [len(set(tops["index"][q]) & set(top)) / max(1, len(top)) for q, top in tops["exact"].items()]
    return scores, float(np.mean(shares))


def index_task(config: EvalConfig, index: str) -> tuple[EvalConfig, RetrievalData]:
    """(the resolved config, its BEIR data) of a task ranked through an index: retrieval only (`SettingError` on
    ``index`` otherwise). The index checks that it holds this corpus (`LongIndex.check_corpus`)."""
    from lengthwise.core.errors import SettingError
    from lengthwise.evaluation.config import Task
    from lengthwise.evaluation.data import read_beir
    from lengthwise.evaluation.run import resolve

    if config.task is not Task.retrieval:
        raise SettingError("index", index, f"ranks retrieval only, not {config.task.value}; use the retrieval task")
    config = resolve(config)
    return config, read_beir(config.data, config.split)


def index_record(
    config: EvalConfig,
    data: RetrievalData,
    runs: Mapping[str, Sequence[Ranking]],
    *,
    index: str,
    described: dict[str, Any],
    model: dict[str, Any],
    out: str | os.PathLike[str] | None = None,
    started: float,
) -> EvalRecord:
    """The ``results.json`` record of a retrieval task ranked through an index: the ``index`` and ``exact`` rankings'
    scores and their overlap (`ranking_scores`), written to `out` as an evaluation's output set when given.

    Args:
        config: The evaluation's settings (resolved, `index_task`).
        data: The BEIR data ranked.
        runs: The ``index`` and ``exact`` rankings, one per query of `data`.
        index: The index as the user named it; `described` its engine, quantize, mode (and fusion) for the record.
        model: The model the index records (name and weight hash).
        out: Where ``results.json`` is written (checked by the caller before any compute); None writes nothing.
        started: `time.perf_counter()` when the job began.
    """
    from lengthwise.core.output_set import write_output_set
    from lengthwise.core.results import json_bytes, provenance
    from lengthwise.evaluation.run import OUTPUT_NAMES

    settings = config.retrieval
    scores, overlap = ranking_scores(runs, data, settings)
    made = provenance(model, dict(data.describe()), {"retrieval": settings.to_dict(), "index": index}, started=started)
    rest = {key: value for key, value in described.items() if key not in ("engine", "quantize")}  # mode, fusion
    shown = {"engine": described["engine"], "quantize": described["quantize"], "overlap": round(overlap, 4),
             "k": settings.top_k, **rest}  # fmt: skip
    record: dict[str, Any] = {"task": "retrieval", "model": model, "scores": scores["index"],
                              "exact_scores": scores["exact"], "bins": {"queries": [], "documents": []},
                              "index": shown, **made}  # fmt: skip
    if out is not None:
        write_output_set(Path(out), {"results.json": json_bytes(record)}, OUTPUT_NAMES, what="an evaluation")
    return record  # type: ignore[return-value]
