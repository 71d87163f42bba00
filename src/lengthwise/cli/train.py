"""`lengthwise train`: flags and an optional YAML/JSON config file mapped onto `TrainConfig` (METHODS §3).

Precedence: the method's defaults, then the config file, then flags given on the command line, then ``--set``.
Each flag's help and default come from its `TrainConfig` field or its method's settings field
(`lengthwise.training.methods`; the help names the methods it applies to), so the two cannot drift; a library
error names the field, and this module names the flag that sets it. Works under
``torchrun --nproc_per_node K -m lengthwise.cli train ...`` (DDP; gloo on CPU).
"""

from __future__ import annotations

import functools
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
_SEPARATE = ("settings", "trust_remote_code")  # a nested object, and a fixed parameter of `train` below
_FLAG_TYPES = {int: int, float: float, bool: bool}  # these give typed flags; any other annotation, a string


def _fields() -> dict[str, tuple[type, str]]:
    """Every setting that gets a flag → (the dataclass that holds it, the methods it applies to): each
    `TrainConfig` field, then each method's own settings (`lengthwise.training.methods`)."""
    import dataclasses

    from lengthwise.training.methods import settings_fields

    common = {item.name: (TrainConfig, "") for item in dataclasses.fields(TrainConfig)}
    own = {name: (kind, kind.label) for name, (kind, _) in settings_fields().items()}
    return {name: place for name, place in {**common, **own}.items() if name not in _SEPARATE}


@functools.cache
def _hints(owner: type) -> dict[str, Any]:
    """`owner`'s type hints, evaluated once: `typing.get_type_hints` compiles every string annotation of the class
    each time it is called, and a call per flag cost ~50 ms of `lengthwise --help`'s start-up."""
    return typing.get_type_hints(owner)


def _option(owner: type, name: str, methods: str = "") -> Any:
    """The option of the field `name` of `owner`: its help (after the `methods` it applies to, for a method's own
    setting), and its default shown from the field."""
    dashed = name.replace("_", "-")
    boolean = _hints(owner).get(name) is bool
    flags = (f"--{dashed}/--no-{dashed}",) if boolean and name not in _SEPARATE else (f"--{dashed}",)
    try:
        default = field_default(owner, name)
    except AttributeError:  # a required field
        default = None
    shown = default.value if hasattr(default, "value") else default
    suffix = f"  [default: {shown}]" if shown not in (None, False) else ""
    short = [_SHORT[name]] if name in _SHORT else []
    text = (f"{methods}: " if methods else "") + field_help(owner, name) + suffix
    return typer.Option(*flags, *short, help=text, show_default=False)


def _settings(config_file: Path | None, flags: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    from lengthwise.core.errors import SettingError
    from lengthwise.training.config import read_config_file

    values: dict[str, Any] = read_config_file(config_file) if config_file else {}
    values.update({key: value for key, value in flags.items() if value is not None})
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise SettingError(None, None, f"--set {assignment!r}: use KEY=VALUE, e.g. --set alpha=0.15")
        values[key.strip().replace("-", "_")] = value.strip()
    return values


def _flag_type(owner: type, name: str) -> type:
    """The Python type of a field's flag, read from its annotation (Enums and paths as strings)."""
    hint = _hints(owner)[name]
    members = typing.get_args(hint) or (hint,)
    return next((_FLAG_TYPES[kind] for kind in members if kind in _FLAG_TYPES), str)


def _generated(command: Callable[..., None]) -> Callable[..., None]:
    """`command(flags, config, resume, trust_remote_code, set_)` with one keyword option per setting (`_fields`),
    its type, help and shown default generated from the dataclasses, so no flag is written by hand."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    places = _fields()
    fields = [
        inspect.Parameter(
            name,
            keyword,
            default=None,
            annotation=Annotated[_flag_type(owner, name) | None, _option(owner, name, methods)],
        )
        for name, (owner, methods) in places.items()
    ]
    hints = typing.get_type_hints(command, include_extras=True)  # the module's annotations are strings
    fixed = [p.replace(kind=keyword, annotation=hints[p.name]) for p in inspect.signature(command).parameters.values()]

    def run(**values: Any) -> None:
        command({name: values.pop(name) for name in places}, **values)

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
    trust_remote_code: Annotated[bool, _option(TrainConfig, "trust_remote_code")] = False,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Any setting, KEY=VALUE (repeatable), e.g. alpha=0.15; overrides the flags."),
    ] = None,
) -> None:
    """Train an embedding model with a length-aware objective; writes OUT/model and OUT/train.json.

    `--recipe length-robust -d PAIRS.jsonl -o RUN` continues training a model with the measured length-robust
    settings (copy-and-concat mixed with plain pairs); any flag given overrides the recipe's value.
    """
    from lengthwise.core.errors import LengthwiseError, SettingError
    from lengthwise.training.config import config_from_mapping

    flags = {**flags, "trust_remote_code": trust_remote_code or None}
    given = {name for name, value in flags.items() if value is not None}  # errors name these as flags, others --set
    try:  # the settings first: a bad one costs no import of torch or the trainer
        settings = config_from_mapping(_settings(config, flags, set_ or []))
    except SettingError as err:
        _fail(setting_message(err, flags=given))
    except LengthwiseError as err:  # DataFormatError: the --config file
        _fail(setting_message(err))
    from transformers.utils import logging as hf_logging

    from lengthwise.cli.options import check_device
    from lengthwise.facade import train as run_training

    hf_logging.set_verbosity_warning()
    try:
        check_device(settings.device)
        result = run_training(settings, resume=resume)
    except SettingError as err:
        _fail(setting_message(err, flags=given))
    except (LengthwiseError, FileExistsError, ImportError) as err:  # DataFormatError, ModelLoadError, TrainingDiverged
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
