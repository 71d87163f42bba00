"""`lengthwise train`: flags and an optional YAML/JSON config file mapped onto `TrainConfig` (METHODS §3).

Precedence: the method's defaults, then the config file, then flags given on the command line, then ``--set``.
Works under ``torchrun --nproc_per_node K -m lengthwise.cli train ...`` (DDP; gloo on CPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

METHOD_HELP = (
    "simcse, laser-self (SimCSE + LA(SER)³ self-ref), laser-intra (COCO-DR + LA(SER)³ intra-ref), coco-dr, "
    "pairs (supervised InfoNCE), copy-concat, hicl (HiCL on SimCSE), simde."
)


def _settings(config_file: Path | None, flags: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    from lengthwise.training.config import read_config_file

    values: dict[str, Any] = read_config_file(config_file) if config_file else {}
    values.update({key: value for key, value in flags.items() if value is not None})
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {assignment!r}: use KEY=VALUE, e.g. --set alpha=0.15")
        values[key.strip().replace("-", "_")] = value.strip()
    return values


@app.callback(invoke_without_command=True, subcommand_metavar="")
def train(
    method: Annotated[str | None, typer.Option("--method", help=METHOD_HELP)] = None,
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            "-d",
            help="Texts (one per line; JSONL `text`; BEIR folder) or positive pairs (JSONL, MRPC TSV); hf:NAME.",
        ),
    ] = None,
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="Run directory (checkpoints, model/, train.json).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Starting model: directory or hub id.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML or JSON file of settings.")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Stop after this many steps.")] = None,
    epochs: Annotated[float | None, typer.Option("--epochs", help="Passes over the data (default 1).")] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="Global batch (default 64).")] = None,
    max_length: Annotated[int | None, typer.Option("--max-length", help="N incl. specials (default 256).")] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="Learning rate (default 3e-5).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed (default 42).")] = None,
    elongate: Annotated[
        str | None, typer.Option("--elongate", help="m for laser-*/copy-concat: random (default), twice or N.")
    ] = None,
    pooling: Annotated[str | None, typer.Option("--pooling", help="mean, cls or max (default: method's).")] = None,
    cache_batch: Annotated[
        int | None, typer.Option("--cache-batch", help="GradCache mini-batch size (pair objectives).")
    ] = None,
    max_examples: Annotated[int | None, typer.Option("--max-examples", help="Seeded sample of the data.")] = None,
    eval_data: Annotated[str | None, typer.Option("--eval-data", help="STS file for dev evaluation.")] = None,
    save_steps: Annotated[int | None, typer.Option("--save-steps", help="Checkpoint every N steps (500).")] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda… Default: best available.")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")
    ] = False,
    trust_remote_code: Annotated[
        bool, typer.Option("--trust-remote-code", help="Allow the model repository's own code to run.")
    ] = False,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Any other setting, KEY=VALUE (repeatable): alpha, segment_length, anchor, …"),
    ] = None,
) -> None:
    """Train an embedding model with a length-aware objective; writes OUT/model and OUT/train.json."""
    from transformers.utils import logging as hf_logging

    from lengthwise.core.data import DataFormatError
    from lengthwise.core.models import ModelLoadError
    from lengthwise.facade import train as run_training
    from lengthwise.training.config import config_from_mapping

    hf_logging.set_verbosity_warning()
    flags = {
        "method": method,
        "data": data,
        "out": out,
        "model": model,
        "max_steps": max_steps,
        "epochs": epochs,
        "batch_size": batch_size,
        "max_length": max_length,
        "lr": lr,
        "seed": seed,
        "elongate": elongate,
        "pooling": pooling,
        "cache_batch": cache_batch,
        "max_examples": max_examples,
        "eval_data": eval_data,
        "save_steps": save_steps,
        "device": device,
        "trust_remote_code": trust_remote_code or None,
    }
    try:
        settings = config_from_mapping(_settings(config, flags, set_ or []))
        result = run_training(settings, resume=resume)
    except (ValueError, DataFormatError, ModelLoadError, FileExistsError, ImportError) as err:
        _fail(str(err))
        return
    loss = "–" if result.final_loss is None else f"{result.final_loss:.4f}"
    console.print(
        f"trained {result.global_step} steps in {result.train_runtime_s:.1f} s (last logged loss {loss}); "
        f"model in {result.model_dir}, record in {result.out / 'train.json'}",
        highlight=False,
    )
