"""Options shared by the commands, and the checks every command runs before any computing.

`field_option` reads a flag's help and default from the library's config dataclass, so the two cannot drift:
a config field documents itself with ``field(default=..., metadata={"help": "..."})``.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = [
    "FLAGS",
    "PRECISION_HELP",
    "AddressOption",
    "BackendOption",
    "DeviceOption",
    "DevicesOption",
    "ModelOption",
    "NameOption",
    "PrecisionOption",
    "TrustOption",
    "UriOption",
    "WorkersOption",
    "check_device",
    "check_out_dir",
    "field_default",
    "field_help",
    "field_option",
    "flag_for",
    "served",
    "setting_message",
]

# The one field → flag table: a library `SettingError` names a config field; the user reads the flag that sets
# it. Only fields whose flag is not ``--field-name`` are listed.
FLAGS = {
    "elongation": "--elongate",
    "histogram": "--bins",
    "curve_ks": "--curve-k",
    "diagnostics": "--all",
    "classifiers": "--classifier",
    "strategy": "--long",
    "retrieval_data": "--retrieval",
    "searches": "--retrieval-search",
    "grid/bounds": "--grid/--bounds",
    "labels": "--label",
}


def _field(config: type, name: str) -> dataclasses.Field[Any]:
    for item in dataclasses.fields(config):
        if item.name == name:
            return item
    raise AttributeError(f"{config.__name__} has no field {name!r}")


def field_help(config: type, name: str) -> str:
    """The help text a config field carries in ``metadata["help"]``."""
    text = _field(config, name).metadata.get("help")
    if not text:
        raise AttributeError(f"{config.__name__}.{name} has no metadata['help']")
    return str(text)


def field_default(config: type, name: str) -> Any:
    """A config field's default (its default factory called, if it has one)."""
    item = _field(config, name)
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    raise AttributeError(f"{config.__name__}.{name} has no default")


def field_option(config: type, name: str, *flags: str, **kwargs: Any) -> Any:
    """A `typer.Option` for `config.name`: flags default to ``--name-with-dashes``, help from the field."""
    return typer.Option(*(flags or (f"--{name.replace('_', '-')}",)), help=field_help(config, name), **kwargs)


ModelOption = Annotated[str, typer.Option("--model", "-m", help="Model directory or Hugging Face id.")]
DevicesOption = Annotated[
    str | None,
    typer.Option("--devices", help="Comma-separated devices, one process each (e.g. cuda:0,cuda:1 or cpu,cpu)."),
]
AddressOption = Annotated[
    str | None, typer.Option("--address", help="Ray cluster to join (--runner ray); default: a local one.")
]
WorkersOption = Annotated[
    int | None, typer.Option("--workers", help="CPU actors for --runner ray (default: one per 4 CPUs).")
]
DeviceOption = Annotated[str | None, typer.Option("--device", help="cpu, cuda, mps… Default: best available.")]
TrustOption = Annotated[bool, typer.Option("--trust-remote-code", help="Allow the model repository's own code to run.")]
PRECISION_HELP = (
    "Inference precision: fp32; bf16 or fp16 (the transformer in half precision, vectors still fp32; on a CPU only "
    "where it has native bf16/fp16); int8 (Linear layers quantized at load, CPU only); or auto: bf16 on a GPU that "
    "has it (else fp16) or a CPU with native bf16 (AMX or AVX512-BF16), else fp32. See docs/benchmarks.md."
)
PrecisionOption = Annotated[str, typer.Option("--precision", help=PRECISION_HELP)]
QUERY_PRECISION_HELP = (
    "The queries' precision: fp32, bf16, fp16, int8, or auto (on a CPU the index's precision; on a GPU bf16, else "
    "fp16). Default: the precision the index's documents were embedded at. An index embedded in fp32 may take "
    "another (bf16 or fp16: a few times faster on a GPU, query vectors within a cosine of about 1e-4 of fp32's; on a "
    "CPU each half-precision query is its own forward, so its vector does not depend on its batch-mates, which costs "
    "more than fp32 queries in batches: docs/serving.md)."
)
QueryPrecisionOption = Annotated[str | None, typer.Option("--precision", help=QUERY_PRECISION_HELP, show_default=False)]
TokensOption = Annotated[
    Path | None,
    typer.Option(
        "--tokens",
        help="Hybrid: rescore the best documents by their tokens (late interaction), from this "
        "folder of `lengthwise encode-tokens` (the index's corpus and model).",
    ),
]
TokenAroundOption = Annotated[
    int | None,
    typer.Option(
        "--token-around",
        help="With --tokens: score each rescored document by the tokens inside its N best windows (by the dense "
        "cosine) only; 0: every token (default 8).",
        min=0,
    ),
]
TokenDepthOption = Annotated[
    int | None,
    typer.Option(
        "--token-depth",
        help="With --tokens: how many of the hybrid's best documents the tokens rescore (default 30); with a "
        "larger --top-k the rest follow in the hybrid's order.",
        min=1,
    ),
]
TokenWeightOption = Annotated[
    float | None,
    typer.Option(
        "--token-weight",
        help="With --tokens: the token side's share of the rescored score, 0–1 (default 0.5).",
        min=0.0,
        max=1.0,
    ),
]
BackendOption = Annotated[
    str, typer.Option("--backend", help="Where the index is served: local (the folder) or milvus (at --uri).")
]
UriOption = Annotated[
    str | None,
    typer.Option(
        "--uri", help="--backend milvus: a Milvus Lite database (out/milvus.db) or a server's http://host:19530."
    ),
]
NameOption = Annotated[str, typer.Option("--name", help="--backend milvus: the name the index is served under.")]


def flag_for(field: str) -> str:
    """The flag that sets a config field: ``FLAGS`` where it differs, else ``--field-name``."""
    return FLAGS.get(field, f"--{field.replace('_', '-')}")


def _command_options() -> set[str] | None:
    """The option strings (``--out``, ``-o``…) of the command now running; None outside a command."""
    try:
        from typer._click.globals import get_current_context  # the click that typer ships (as cli.app uses)
    except ImportError:  # a typer that uses the installed click
        from click import get_current_context  # type: ignore[no-redef]

    context = get_current_context(silent=True)

    if context is None:
        return None
    return {option for param in context.command.params for option in (*param.opts, *param.secondary_opts)}


def setting_message(error: Exception, *, flags: Collection[str] | None = None) -> str:
    """A library error as the user should read it: the field of a `LengthwiseError` (`SettingError`,
    `DataFormatError`…) as its flag, ``--flag value: problem``.

    `flags`: the fields this command has a flag for; another field is set with ``--set field=value``
    (``lengthwise train``). Without `flags`, a field whose flag (`flag_for`) the running command does not have (an
    argument of a library function, not a setting of this command) keeps the library's ``field=value: problem``.
    A switch's field (a bool value) reads ``without --flag: problem`` (or ``with --flag``). Any other error is its
    own message.
    """
    from lengthwise.core.errors import LengthwiseError, shown_value

    if not isinstance(error, LengthwiseError) or not error.field:
        return str(error)
    value = shown_value(error.value)  # a path as its text, unquoted; another text quoted; a list as its items
    text = ", ".join(map(str, value)) if isinstance(value, list) else value
    if isinstance(value, str) and not isinstance(error.value, os.PathLike):
        text = repr(value)
    if flags is not None:
        if error.field not in flags:
            return f"--set {error.field}={value} (or `{error.field}:` in --config): {error.problem}"
        return f"{flag_for(error.field)} {text}: {error.problem}"
    flag, options = flag_for(error.field), _command_options()
    if options is not None and not set(flag.split("/")) <= options:
        return str(error)
    if isinstance(error.value, bool):  # a switch: given or not (``trust_remote_code=False`` → without the flag)
        return f"{'with' if error.value else 'without'} {flag}: {error.problem}"
    return f"{flag}: {error.problem}" if error.value is None else f"{flag} {text}: {error.problem}"


def served(backend: str, uri: str | None, name: str) -> Any:
    """The `lengthwise.search.backend.Backend` that ``--backend``, ``--uri`` and ``--name`` name (checked:
    a `SettingError` on the flag at fault)."""
    from lengthwise.search.backend import Backend

    return Backend(backend, uri, name)


def check_out_dir(path: Path, field: str = "out") -> None:
    """Raise a `SettingError` on `field` (the CLI shows its flag) unless `path` is (or can be made) a writable
    directory.

    Called before any model is loaded, so an unwritable output never costs the computation. The folders made to
    try it are removed again: a command refused later leaves no empty `path` behind (the command makes it when it
    writes).
    """
    from lengthwise.core.errors import SettingError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SettingError(field, path, "exists and is not a directory; pass a directory path")
    probe_root = path
    while not probe_root.exists():
        probe_root = probe_root.parent
    if not probe_root.is_dir() or not os.access(probe_root, os.W_OK | os.X_OK):
        raise SettingError(field, path, f"{probe_root} is not writable; pass a directory you can write to")
    made = [folder for folder in (path, *path.parents) if not folder.exists()]  # deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        raise SettingError(field, path, f"cannot write there ({err.strerror}); pass a writable directory") from err
    finally:
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                break


def check_device(device: str | None) -> None:
    """Raise a one-line `SettingError` on ``device`` (shown as ``--device``) when torch cannot use it here."""
    from lengthwise.core._devices import check_device as check

    check(device)


def quiet_loading() -> None:
    """No progress bar for loading weights (instant here): a command's output is what it found, or one error line."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
