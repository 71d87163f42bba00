"""`lengthwise train`: flags and an optional YAML/JSON config file mapped onto `TrainConfig` (METHODS §3).

Precedence: the method's defaults, then the config file, then flags given on the command line, then ``--set``.
Each flag's help and default come from its `TrainConfig` field, so the two cannot drift; a library error names the
field, and this module names the flag that sets it. Works under
``torchrun --nproc_per_node K -m lengthwise.cli train ...`` (DDP; gloo on CPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.options import field_default, field_help, setting_message
from lengthwise.training.config import TrainConfig

if TYPE_CHECKING:
    pass

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

_SHORT = {"data": "-d", "out": "-o", "model": "-m"}


def _option(name: str) -> Any:
    """The `--name` option of a `TrainConfig` field: its help, and its default shown from the field."""
    flags = (f"--{name.replace('_', '-')}", *([_SHORT[name]] if name in _SHORT else []))
    try:
        default = field_default(TrainConfig, name)
    except AttributeError:  # a required field
        default = None
    shown = default.value if hasattr(default, "value") else default
    suffix = f"  [default: {shown}]" if shown not in (None, False) else ""
    return typer.Option(*flags, help=field_help(TrainConfig, name) + suffix, show_default=False)


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
    method: Annotated[str | None, _option("method")] = None,
    recipe: Annotated[str | None, _option("recipe")] = None,
    data: Annotated[str | None, _option("data")] = None,
    out: Annotated[str | None, _option("out")] = None,
    model: Annotated[str | None, _option("model")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML or JSON file of settings.")] = None,
    max_steps: Annotated[int | None, _option("max_steps")] = None,
    epochs: Annotated[float | None, _option("epochs")] = None,
    batch_size: Annotated[int | None, _option("batch_size")] = None,
    max_length: Annotated[int | None, _option("max_length")] = None,
    lr: Annotated[float | None, _option("lr")] = None,
    warmup_ratio: Annotated[float | None, _option("warmup_ratio")] = None,
    seed: Annotated[int | None, _option("seed")] = None,
    elongate: Annotated[str | None, _option("elongate")] = None,
    pooling: Annotated[str | None, _option("pooling")] = None,
    mlm_weight: Annotated[float | None, _option("mlm_weight")] = None,
    cache_batch: Annotated[int | None, _option("cache_batch")] = None,
    max_examples: Annotated[int | None, _option("max_examples")] = None,
    eval_data: Annotated[str | None, _option("eval_data")] = None,
    eval_attack: Annotated[int | None, _option("eval_attack")] = None,
    save_steps: Annotated[int | None, _option("save_steps")] = None,
    precision: Annotated[str | None, _option("precision")] = None,
    device: Annotated[str | None, _option("device")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --out from its last complete checkpoint.")
    ] = False,
    trust_remote_code: Annotated[bool, _option("trust_remote_code")] = False,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Any other setting, KEY=VALUE (repeatable): alpha, segment_length, anchor, …"),
    ] = None,
) -> None:
    """Train an embedding model with a length-aware objective; writes OUT/model and OUT/train.json.

    `--recipe length-robust -d PAIRS.jsonl -o RUN` continues training a model with the measured length-robust
    settings (copy-and-concat mixed with plain pairs); any flag given overrides the recipe's value.
    """
    from lengthwise.core.errors import SettingError
    from lengthwise.training.config import config_from_mapping

    flags = {
        "method": method,
        "recipe": recipe,
        "data": data,
        "out": out,
        "model": model,
        "max_steps": max_steps,
        "epochs": epochs,
        "batch_size": batch_size,
        "max_length": max_length,
        "lr": lr,
        "warmup_ratio": warmup_ratio,
        "seed": seed,
        "elongate": elongate,
        "pooling": pooling,
        "mlm_weight": mlm_weight,
        "cache_batch": cache_batch,
        "max_examples": max_examples,
        "eval_data": eval_data,
        "eval_attack": eval_attack,
        "save_steps": save_steps,
        "precision": precision,
        "device": device,
        "trust_remote_code": trust_remote_code or None,
    }
    try:  # the settings first: a bad one costs no import of torch or the trainer
        settings = config_from_mapping(_settings(config, flags, set_ or []))
    except SettingError as err:
        _fail(setting_message(err, flags=flags))
    except ValueError as err:
        _fail(setting_message(err))
    from transformers.utils import logging as hf_logging

    from lengthwise.cli.options import check_device
    from lengthwise.core.models import ModelLoadError
    from lengthwise.facade import train as run_training

    hf_logging.set_verbosity_warning()
    try:
        check_device(settings.device)
        result = run_training(settings, resume=resume)
    except SettingError as err:
        _fail(setting_message(err, flags=flags))
    except (ValueError, ModelLoadError, FileExistsError, ImportError) as err:  # DataFormatError is a ValueError
        _fail(setting_message(err))
    if result.already_finished:
        console.print(
            f"nothing to do: the run in {result.out} has finished ({result.global_step} steps; model in "
            f"{result.model_dir}); to train further, start a new --out",
            highlight=False,
            markup=False,
        )
        return
    loss = "–" if result.final_loss is None else f"{result.final_loss:.4f}"
    console.print(
        f"trained {result.global_step} steps in {result.train_runtime_s:.1f} s (last logged loss {loss}); "
        f"model in {result.model_dir}, record in {result.out / 'train.json'}",
        highlight=False,
        markup=False,
    )
