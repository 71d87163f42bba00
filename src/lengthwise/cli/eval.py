"""`lengthwise eval`: STS, retrieval or classification, overall and per token-length bin, into OUT/results.json.

A thin adapter from flags to `lengthwise.evaluation`; heavy imports happen inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.evaluation.tasks import Task

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _headline_table(payload: dict[str, Any]) -> Table:
    table = Table(title=f"{payload['task']} — {payload['model']['name']}", title_justify="left")
    bins = payload["bins"]
    rows = bins["queries"] if payload["task"] == "retrieval" else bins
    metrics = list(payload["scores"])
    table.add_column("length bin")
    table.add_column("n", justify="right")
    for metric in metrics:
        table.add_column(metric, justify="right")
    table.add_row("all", "", *(_number(payload["scores"][m]) for m in metrics), style="bold")
    for row in rows:
        table.add_row(row["bin"], str(row["count"]), *(_number(row.get(m)) for m in metrics))
    return table


def _number(value: object) -> str:
    return "–" if value is None else f"{float(value):.2f}"  # type: ignore[arg-type]


@app.callback(invoke_without_command=True, subcommand_metavar="")
def evaluate(
    task: Annotated[Task, typer.Option("--task", "-t", help="sts, retrieval or classification.")],
    data: Annotated[
        str,
        typer.Option(
            "--data",
            "-d",
            help="STS file or SentEval folder; BEIR folder; folder with train/test.jsonl; or hf:NAME (online).",
        ),
    ],
    model: Annotated[str, typer.Option("--model", "-m", help="Model directory or Hugging Face id.")] = DEFAULT_MODEL,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("lengthwise-eval"),
    split: Annotated[str, typer.Option("--split", help="Retrieval qrels split / hub test split.")] = "test",
    train: Annotated[
        Path | None, typer.Option("--train", help="Classification: train JSONL when --data is the test JSONL.")
    ] = None,
    bin_width: Annotated[int, typer.Option("--bin-width", help="Width of a token-length bin.")] = 100,
    top_k: Annotated[int, typer.Option("--top-k", help="Retrieval: documents kept per query.")] = 100,
    classifier: Annotated[
        list[str] | None, typer.Option("--classifier", help="Classification: logreg and/or mlp (repeatable).")
    ] = None,
    few_shot: Annotated[
        list[int] | None, typer.Option("--few-shot", help="Classification: k examples per class (repeatable).")
    ] = None,
    no_few_shot: Annotated[bool, typer.Option("--no-few-shot", help="Classification: skip few-shot runs.")] = False,
    no_full: Annotated[bool, typer.Option("--no-full", help="Classification: skip the full-train-set run.")] = False,
    repeats: Annotated[int, typer.Option("--repeats", help="Classification: few-shot repeats.")] = 10,
    few_shot_sampler: Annotated[
        str,
        typer.Option("--few-shot-sampler", help="Classification: 'seeded' (per-repeat seed) or 'mteb' (MTEB's draws)."),
    ] = "seeded",
    max_train: Annotated[int, typer.Option("--max-train", help="Classification: stratified train sample.")] = 2000,
    max_test: Annotated[int, typer.Option("--max-test", help="Classification: stratified test sample.")] = 2000,
    all_data: Annotated[bool, typer.Option("--all-data", help="Classification: use every text (no sampling).")] = False,
    max_length: Annotated[int | None, typer.Option("--max-length", help="Model max length N (specials incl.).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Texts per forward pass.")] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Seed for sampling and classifiers.")] = 42,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda, mps… Default: best available.")] = None,
    trust_remote_code: Annotated[
        bool, typer.Option("--trust-remote-code", help="Allow the model repository's own code to run.")
    ] = False,
    tempscale: Annotated[
        float | None,
        typer.Option(
            "--tempscale", help="Evaluate under TempScale with this attention temperature t (t < 1 sharpens)."
        ),
    ] = None,
) -> None:
    """Evaluate a model overall and per token-length bin; writes OUT/results.json and PNG plots.

    Scores are ×100: STS `spearman`/`pearson` (cosine, as MTEB); retrieval `ndcg@10`, `mrr@10`, `recall@100`,
    `map@100` (pytrec_eval); classification `accuracy`/`macro_f1` (logistic regression, MTEB style).
    `--tempscale T` runs every encode under `TempScaleConfig(t=T)` (replacing any TempScale saved with the model).
    """
    import time
    from dataclasses import asdict

    from transformers.utils import logging as hf_logging

    from lengthwise.core.bins import LengthBins
    from lengthwise.core.data import DataFormatError
    from lengthwise.core.embed import TokenView
    from lengthwise.core.encoder import as_encoder
    from lengthwise.core.models import ModelLoadError, model_fingerprint
    from lengthwise.core.results import environment, write_json_atomic
    from lengthwise.evaluation.classification import ClassificationConfig, ClassificationResult
    from lengthwise.evaluation.plots import write_plots
    from lengthwise.evaluation.retrieval import RetrievalConfig, RetrievalResult
    from lengthwise.evaluation.sts import STSResult
    from lengthwise.evaluation.tasks import evaluate_loaded, load_task_data
    from lengthwise.facade import load_model

    hf_logging.disable_progress_bar()
    progress = console.is_terminal
    sample: dict[str, int | None] = (
        {"train": None, "test": None} if all_data else {"train": max_train, "test": max_test}
    )
    started = time.perf_counter()
    try:
        settings: dict[str, Any] = {"bin_width": bin_width, "batch_size": batch_size, "seed": seed, "split": split}
        retrieval_config = RetrievalConfig(top_k=top_k)
        config = ClassificationConfig(
            classifiers=tuple(classifier or ("logreg",)),
            full=not no_full,
            few_shot=() if no_few_shot else tuple(few_shot or (8,)),
            repeats=repeats,
            seed=seed,
            few_shot_sampler=few_shot_sampler,
        )
        if task is Task.classification:
            settings.update(classification=asdict(config), sample=sample)
        elif task is Task.retrieval:
            settings.update(retrieval=asdict(retrieval_config))
        dataset = load_task_data(
            task, data, split=split, train=train, max_train=sample["train"], max_test=sample["test"], seed=seed
        )
        with console.status(f"loading {model}"):
            encoder_model = load_model(
                model, device=device, trust_remote_code=trust_remote_code, max_seq_length=max_length
            )
        view = TokenView(encoder_model)
        bins = LengthBins.for_view(view, bin_width)
        encoder = as_encoder(encoder_model)
        if tempscale is not None:
            from lengthwise.tempscale import TempScaleConfig, TempScaleEncoder

            ts_config = TempScaleConfig(t=tempscale)
            encoder = TempScaleEncoder(encoder_model, ts_config)
            settings["tempscale"] = ts_config.to_dict()
        result = evaluate_loaded(
            task,
            encoder,
            dataset,
            retrieval=retrieval_config,
            classification=config,
            view=view,
            bins=bins,
            batch_size=batch_size,
            show_progress=progress,
        )
        table: Any = result.bins if isinstance(result, STSResult) else None
        if isinstance(result, RetrievalResult):
            table = {"queries": result.query_bins, "documents": result.document_bins}
        elif isinstance(result, ClassificationResult):
            table = result.runs[0].get("bins", [])
    except (ValueError, ModelLoadError, DataFormatError) as err:
        _fail(str(err))
        return
    payload = {
        "task": task.value,
        "scores": result.scores,
        "bins": table,
        "bin_spec": bins.describe(),
        "result": result.to_dict(),
        "model": model_fingerprint(encoder_model, model),
        "data": dataset.describe(),
        "settings": settings,
        "wall_time_s": round(time.perf_counter() - started, 3),
        "environment": environment(),
    }
    write_json_atomic(out / "results.json", payload)
    plots = write_plots(payload, out)
    console.print(_headline_table(payload))
    console.print(f"wrote {out / 'results.json'} and {len(plots)} plot(s)", highlight=False)
