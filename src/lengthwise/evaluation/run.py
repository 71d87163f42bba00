"""One evaluation run, settings to record: `evaluate_task` scores a model on one task, overall and per length bin,
and writes the record — ``results.json`` (`lengthwise.evaluation.schema.EvalRecord`) and its PNG plots — as one set.

`lengthwise eval` is flags → `EvalConfig` → `evaluate_task` → print. Whatever joins another room (a model loaded
with its saved TempScale settings, a TempScale encoder) is built by the caller and passed in as `model`/`encoder`.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.bins import LengthBins
from lengthwise.core.embed import TokenView
from lengthwise.core.encoder import TextEncoder, as_encoder
from lengthwise.core.models import model_fingerprint
from lengthwise.core.output_set import check_output_target, write_output_set
from lengthwise.core.results import Provenance, json_bytes, provenance
from lengthwise.evaluation._plots import PLOT_NAMES, write_plots
from lengthwise.evaluation.classification import ClassificationResult
from lengthwise.evaluation.config import EvalConfig, Task
from lengthwise.evaluation.retrieval import RetrievalResult
from lengthwise.evaluation.schema import ClassificationEvalRecord, EvalRecord, RetrievalEvalRecord, STSEvalRecord
from lengthwise.evaluation.sts import STSResult
from lengthwise.evaluation.tasks import TaskData, TaskResult, drops_self_hits, evaluate_loaded, load_task_data

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["check_output", "evaluate_task", "load_data", "record_of", "resolve", "write_record"]

RESULTS_NAME = "results.json"
OUTPUT_NAMES = frozenset({RESULTS_NAME, *PLOT_NAMES})  # what an evaluation's --out folder may hold


def check_output(out: str | Path) -> None:
    """A `SettingError` on ``out`` unless `out` can take an evaluation's output set (`lengthwise.core.output_set`):
    absent, empty, or holding only an earlier evaluation's ``results.json`` and plots."""
    check_output_target(Path(out), OUTPUT_NAMES, what="an evaluation", field="out")


def resolve(config: EvalConfig) -> EvalConfig:
    """`config` with what follows from its data settled: the self-hit rule of a retrieval task (`drops_self_hits`)."""
    if config.task is not Task.retrieval:
        return config
    drop = drops_self_hits(config.self_hits, config.data)
    return replace(config, retrieval=replace(config.retrieval, drop_self_hits=drop))


def load_data(config: EvalConfig) -> TaskData:
    """The task's data as `config` names it (`lengthwise.evaluation.tasks.load_task_data`)."""
    return load_task_data(
        config.task,
        config.data,
        split=config.split,
        train=config.train,
        max_train=config.max_train,
        max_test=config.max_test,
        seed=config.seed,
    )


def record_of(result: TaskResult, bins: LengthBins, made: Provenance) -> EvalRecord:
    """The ``results.json`` record of one result: headline scores and bin table first, then the full result."""
    spec = bins.describe()
    if isinstance(result, STSResult):
        return STSEvalRecord(
            task="sts", scores=dict(result.scores), bins=result.bins, bin_spec=spec, result=result.to_dict(), **made
        )
    if isinstance(result, RetrievalResult):
        return RetrievalEvalRecord(
            task="retrieval",
            scores={name: value for name, value in result.scores.items()},
            bins={"queries": result.query_bins, "documents": result.document_bins},
            bin_spec=spec,
            result=result.to_dict(),
            **made,
        )
    if isinstance(result, ClassificationResult):
        return ClassificationEvalRecord(
            task="classification",
            scores={name: value for name, value in result.scores.items()},
            bins=result.runs[0].get("bins", []),
            bin_spec=spec,
            result=result.to_dict(),
            **made,
        )
    raise TypeError(f"not an evaluation result: {type(result).__name__}")


def write_record(record: EvalRecord, out: str | Path) -> list[Path]:
    """Write ``results.json`` and its plots as the whole content of folder `out`, as one set; returns the plots'
    paths.

    The set is drawn first, then swapped in at once (`lengthwise.core.output_set.write_output_set`): a crash, a
    kill or a Ctrl-C leaves the complete previous set or the complete new one, never a mix, and no plot of an
    earlier run survives beside a ``results.json`` it does not belong to. A folder holding other files is refused.
    """
    out = Path(out)
    check_output(out)
    files = {RESULTS_NAME: json_bytes(record)}  # first: a record that is not JSON fails before any drawing
    with tempfile.TemporaryDirectory(prefix="lengthwise-eval-plots-") as drawn:
        names = [plot.name for plot in write_plots(record, drawn)]
        files |= {name: (Path(drawn) / name).read_bytes() for name in names}
    write_output_set(out, files, OUTPUT_NAMES, what="an evaluation")
    return [out / name for name in names]


def evaluate_task(
    config: EvalConfig,
    model: SentenceTransformer,
    *,
    model_name: str,
    out: str | Path | None = None,
    data: TaskData | None = None,
    encoder: TextEncoder | None = None,
    extra_settings: dict[str, Any] | None = None,
    show_progress: bool = False,
    started: float | None = None,
) -> EvalRecord:
    """Score `model` (through `encoder`, default the plain model) on `config`'s task; write the record to `out`.

    `data` is the task's data when the caller has read it already (`load_data`); `extra_settings` joins the
    record's settings (e.g. the TempScale temperature the caller's encoder applies); `started` is a
    `time.perf_counter()` reading from before the caller's own work, so the wall time covers it.
    """
    started = time.perf_counter() if started is None else started
    if out is not None:
        check_output(out)  # before the compute, not after it
    config = resolve(config)
    data = load_data(config) if data is None else data
    view = TokenView(model)
    bins = LengthBins.for_view(view, config.bin_width)
    result = evaluate_loaded(
        config.task,
        encoder if encoder is not None else as_encoder(model),
        data,
        retrieval=config.retrieval,
        classification=config.classification,
        view=view,
        bins=bins,
        batch_size=config.batch_size,
        show_progress=show_progress,
    )
    settings = config.settings() | (extra_settings or {})
    made = provenance(model_fingerprint(model, model_name), dict(data.describe()), settings, started=started)
    record = record_of(result, bins, made)
    if out is not None:
        write_record(record, out)
    return record
