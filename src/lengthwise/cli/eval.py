"""`lengthwise eval`: STS, retrieval or classification, overall and per token-length bin, into OUT/results.json.

Flags → `lengthwise.evaluation.config.EvalConfig` → `lengthwise.evaluation.run.evaluate_task` → a printed table.
Help texts and defaults come from the config fields. Everything that can be checked without the model (the
settings, `--device`, `--out`, the data) is checked before the model loads; heavy imports happen inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lengthwise.cli.console import console, say
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.options import (
    PRECISION_HELP,
    DeviceOption,
    NameOption,
    TokenAroundOption,
    TokenDepthOption,
    TokensOption,
    TokenWeightOption,
    TrustOption,
    UriOption,
    check_device,
    check_out_dir,
    field_default,
    field_option,
    served,
    setting_message,
)
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import LengthwiseError
from lengthwise.evaluation.config import (
    ClassificationConfig,
    Classifier,
    EvalConfig,
    FewShotSampler,
    RetrievalConfig,
    SelfHits,
    Task,
)
from lengthwise.search.backend import DEFAULT_NAME
from lengthwise.search.types import TokenChoice

if TYPE_CHECKING:  # rich.table loads when a command prints, not for `lengthwise --help`
    from rich.table import Table

    from lengthwise.evaluation.schema import EvalRecord

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _headline_table(record: EvalRecord) -> Table:
    from rich.table import Table
    from rich.text import Text

    title = Text(f"{record['task']} — {record['model']['name']}")  # a model path is printed as it is, no markup
    table = Table(title=title, title_justify="left")
    rows = record["bins"]["queries"] if record["task"] == "retrieval" else record["bins"]
    metrics = list(record["scores"])
    table.add_column("length bin")
    table.add_column("n", justify="right")
    for metric in metrics:
        table.add_column(metric, justify="right")
    table.add_row("all", "", *(_number(record["scores"][m]) for m in metrics), style="bold")
    for row in rows:
        table.add_row(row["bin"], str(row["count"]), *(_number(row.get(m)) for m in metrics))
    return table


def _number(value: float | None) -> str:
    return "–" if value is None else f"{float(value):.2f}"


@app.callback(invoke_without_command=True, subcommand_metavar="")
def evaluate(
    task: Annotated[Task, field_option(EvalConfig, "task", "--task-type", "-t")],
    data: Annotated[str, field_option(EvalConfig, "data", "--data", "-d")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help=f"Model directory or Hugging Face id (default: {DEFAULT_MODEL}).", show_default=False
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output directory; it is replaced as one unit, so it must be new, empty or an earlier eval's.",
        ),
    ] = Path("lengthwise-eval"),
    split: Annotated[str, field_option(EvalConfig, "split")] = field_default(EvalConfig, "split"),
    train: Annotated[Path | None, field_option(EvalConfig, "train")] = None,
    bin_width: Annotated[int, field_option(EvalConfig, "bin_width")] = field_default(EvalConfig, "bin_width"),
    top_k: Annotated[int, field_option(RetrievalConfig, "top_k")] = field_default(RetrievalConfig, "top_k"),
    self_hits: Annotated[SelfHits, field_option(EvalConfig, "self_hits")] = field_default(EvalConfig, "self_hits"),
    classifier: Annotated[
        list[Classifier] | None, field_option(ClassificationConfig, "classifiers", "--classifier")
    ] = (None),
    few_shot: Annotated[list[int] | None, field_option(ClassificationConfig, "few_shot")] = None,
    no_few_shot: Annotated[bool, typer.Option("--no-few-shot", help="Classification: skip few-shot runs.")] = False,
    full: Annotated[bool, field_option(ClassificationConfig, "full", "--full/--no-full")] = field_default(
        ClassificationConfig, "full"
    ),
    repeats: Annotated[int, field_option(ClassificationConfig, "repeats")] = field_default(
        ClassificationConfig, "repeats"
    ),
    few_shot_sampler: Annotated[FewShotSampler, field_option(ClassificationConfig, "few_shot_sampler")] = (
        field_default(ClassificationConfig, "few_shot_sampler")
    ),
    max_train: Annotated[int, field_option(EvalConfig, "max_train")] = field_default(EvalConfig, "max_train"),
    max_test: Annotated[int, field_option(EvalConfig, "max_test")] = field_default(EvalConfig, "max_test"),
    all_data: Annotated[bool, typer.Option("--all-data", help="Classification: use every text (no sampling).")] = False,
    max_length: Annotated[int | None, typer.Option("--max-length", help="Model max length N (specials incl.).")] = None,
    batch_size: Annotated[int, field_option(EvalConfig, "batch_size")] = field_default(EvalConfig, "batch_size"),
    seed: Annotated[int, field_option(EvalConfig, "seed")] = field_default(EvalConfig, "seed"),
    device: DeviceOption = None,
    precision: Annotated[
        str | None,
        typer.Option(
            "--precision",
            help=f"{PRECISION_HELP} Default: fp32. With --index: the queries' (default: the index's).",
            show_default=False,
        ),
    ] = None,
    trust_remote_code: TrustOption = False,
    tempscale: Annotated[
        float | None,
        typer.Option(
            "--tempscale", help="Evaluate under TempScale with this attention temperature t (t < 1 sharpens)."
        ),
    ] = None,
    long: Annotated[
        str | None,
        typer.Option(
            "--long",
            help="Read whole long texts: default (the recommended multi-vector setting, docs/longdoc.md), truncate, "
            "chunk-mean, chunk-weighted, multi-vector or late-chunking (unset: the choice saved with the model, else "
            "the model's own truncation).",
        ),
    ] = None,
    window: Annotated[int | None, typer.Option("--window", help="--long: tokens per window (specials incl.).")] = None,
    stride: Annotated[int | None, typer.Option("--stride", help="--long: step between windows (< window).")] = None,
    index: Annotated[
        Path | None,
        typer.Option(
            "--index",
            help="Retrieval: rank through this index (`lengthwise index build`); the record "
            "gives the exact scan's scores beside it (the index's model and settings are used).",
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="--index: dense, lexical or hybrid (default: the index's recorded mode)."),
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", help="Rank through the index in milvus (at --uri), or local (--index).")
    ] = "local",
    uri: UriOption = None,
    name: NameOption = DEFAULT_NAME,
    tokens: TokensOption = None,
    token_weight: TokenWeightOption = None,
    token_around: TokenAroundOption = None,
    token_depth: TokenDepthOption = None,
) -> None:
    """Evaluate a model overall and per token-length bin; writes OUT/results.json and PNG plots.

    Scores are ×100: STS `spearman`/`pearson` (cosine, as MTEB); retrieval `ndcg@10`, `mrr@10`, `recall@100`,
    `map@100` (pytrec_eval); classification `accuracy`/`macro_f1` (logistic regression, MTEB style).
    Retrieval keeps a retrieved document whose id is the query id, as MTEB does, except for the data sets whose
    MTEB task drops it (ArguAna, Quora, …: `--self-hits auto`, the default, recognises them by name).
    `--tempscale T` runs every encode under `TempScaleConfig(t=T)` (replacing any TempScale saved with the model).
    """
    try:
        config = EvalConfig(
            task=task,
            data=data,
            split=split,
            train=train,
            bin_width=bin_width,
            batch_size=batch_size,
            seed=seed,
            max_train=None if all_data else max_train,
            max_test=None if all_data else max_test,
            self_hits=self_hits,
            retrieval=RetrievalConfig(top_k=top_k),
            classification=ClassificationConfig(
                classifiers=tuple(classifier or field_default(ClassificationConfig, "classifiers")),
                full=full,
                few_shot=() if no_few_shot else tuple(few_shot or field_default(ClassificationConfig, "few_shot")),
                repeats=repeats,
                seed=seed,
                few_shot_sampler=few_shot_sampler,
            ),
        )
    except LengthwiseError as err:
        _fail(setting_message(err))
    _run(config, model, out, device, max_length, trust_remote_code, tempscale, (long, window, stride), precision,
         (index, mode, (backend, uri, name), TokenChoice(tokens, token_weight, token_around, token_depth)))  # fmt: skip


def _run(
    config: EvalConfig,
    model: str | None,
    out: Path,
    device: str | None,
    max_length: int | None,
    trust_remote_code: bool,
    tempscale: float | None,
    long: tuple[str | None, int | None, int | None] = (None, None, None),
    precision: str | None = None,
    searched: tuple[Path | None, str | None, tuple[str, str | None, str], TokenChoice] = (
        None,
        None,
        ("local", None, ""),
        TokenChoice(),
    ),
) -> None:
    """Check the device and `--out`, then make the one library call (`lengthwise.evaluate`) and print."""
    from rich.text import Text
    from transformers.utils import logging as hf_logging

    from lengthwise.pipelines import evaluate

    hf_logging.disable_progress_bar()
    strategy, window, stride = long
    index, mode, (kind, uri, name), tokens = searched
    try:
        backend = served(kind, uri, name or DEFAULT_NAME)
        check_device(device)
        check_out_dir(out)
        with console.status(Text(f"evaluating {uri or index or model or DEFAULT_MODEL}")):  # progress: a bar or lines
            record = evaluate(config, model, out=out, device=device, max_length=max_length,
                              trust_remote_code=trust_remote_code, precision=precision, tempscale=tempscale,
                              long=strategy, window=window, stride=stride, index=index, mode=mode, backend=backend,
                              tokens=tokens, show_progress=True)  # fmt: skip
    except LengthwiseError as err:  # a setting (or the data) refused, a model that does not load
        _fail(setting_message(err))
    except OSError as err:
        _fail(f"--out {out}: could not write the results ({err.strerror or err}); pass a writable directory")
    console.print(_headline_table(record))
    if "exact_scores" in record:  # --index: the exact scan on the same query vectors
        extra: dict[str, Any] = dict(record)
        exact = "  ".join(f"{name} {value:.2f}" for name, value in extra["exact_scores"].items())
        shared, k = extra["index"]["overlap"], extra["index"]["k"]
        say(f"exact scan: {exact}; the index returns {shared:.1%} of its top {k}")
    plots = sorted(out.glob("*.png"))
    say(f"wrote {out / 'results.json'} and {len(plots)} plot(s)")
