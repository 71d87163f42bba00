"""`lengthwise train`: flags and an optional YAML/JSON config file mapped onto `TrainConfig` (METHODS §3).

Precedence: the method's defaults, then the config file, then flags given on the command line, then ``--set``.
Each flag's help and default come from its `TrainConfig` field, so the two cannot drift; a library error names the
field, and this module names the flag that sets it. Works under
``torchrun --nproc_per_node K -m lengthwise.cli train ...`` (DDP; gloo on CPU).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.options import field_default, field_help, setting_message
from lengthwise.training.config import TrainConfig

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


# The `TrainConfig` fields that get a flag of their own (any other field: --set KEY=VALUE or the config file).
FLAG_FIELDS = (
    "method", "recipe", "data", "out", "model", "max_steps", "epochs", "batch_size", "max_length", "lr",
    "warmup_ratio", "seed", "elongate", "pooling", "mlm_weight", "cache_batch", "max_examples", "eval_data",
    "eval_attack", "save_steps", "precision", "device",
)  # fmt: skip
_FLAG_TYPES = {int: int, float: float}  # an annotation naming one of these gives a typed flag; any other, a string


def _flag_type(name: str) -> type:
    """The Python type of a field's flag, read from the `TrainConfig` annotation (Enums and paths as strings)."""
    hint = typing.get_type_hints(TrainConfig)[name]
    members = typing.get_args(hint) or (hint,)
    return next((_FLAG_TYPES[kind] for kind in members if kind in _FLAG_TYPES), str)


def _generated(command: Callable[..., None]) -> Callable[..., None]:
    """`command(flags, config, resume, trust_remote_code, set_)` with one keyword option per `FLAG_FIELDS` field,
    its type, help and shown default generated from `TrainConfig`, so no flag is written by hand."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    fields = [
        inspect.Parameter(name, keyword, default=None, annotation=Annotated[_flag_type(name) | None, _option(name)])
        for name in FLAG_FIELDS
    ]
    hints = typing.get_type_hints(command, include_extras=True)  # the module's annotations are strings
    fixed = [p.replace(kind=keyword, annotation=hints[p.name]) for p in inspect.signature(command).parameters.values()]

    def run(**values: Any) -> None:
        command({name: values.pop(name) for name in FLAG_FIELDS}, **values)

    run.__signature__ = inspect.Signature([*fields, *fixed[1:]])  # type: ignore[attr-defined]
    run.__doc__, run.__name__ = command.__doc__, command.__name__
    return run


@app.callback(invoke_without_command=True, subcommand_metavar="")
@_generated
def train(
    flags: dict[str, Any],
    config: Annotated[Path | None, typer.Option("--config", help="YAML or JSON file of settings.")] = None,
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

    flags = {**flags, "trust_remote_code": trust_remote_code or None}
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
