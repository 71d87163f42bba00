"""`lengthwise longdoc`: write synthetic passkey / needle tasks, score them LongEmbed-style, tune and save a choice.

Thin adapters from flags to `lengthwise.longdoc` (and `lengthwise.evaluation` for BEIR dev splits); heavy imports
happen inside the commands.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lengthwise.cli.app import command_group
from lengthwise.cli.console import console, escape, say
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.options import (
    DeviceOption,
    ModelOption,
    PrecisionOption,
    check_device,
    check_out_dir,
    field_option,
    quiet_loading,
    setting_message,
)
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import LengthwiseError, SettingError
from lengthwise.longdoc.config import LongDocConfig

if TYPE_CHECKING:
    pass

app = command_group(
    "Long documents (METHODS §5): synthetic passkey/needle tasks, LongEmbed-style scores, tune and save."
)

LongOption = Annotated[str, field_option(LongDocConfig, "strategy", "--long")]
WindowOption = Annotated[int | None, field_option(LongDocConfig, "window")]
StrideOption = Annotated[int | None, field_option(LongDocConfig, "stride")]
BestWindowsOption = Annotated[int | None, field_option(LongDocConfig, "best_windows")]
ScalesOption = Annotated[str | None, field_option(LongDocConfig, "scales")]
FuseOption = Annotated[float | None, field_option(LongDocConfig, "fuse_mean")]
SentenceOption = Annotated[bool, field_option(LongDocConfig, "sentence_cuts", "--sentence-cuts")]
MacroOption = Annotated[int | None, field_option(LongDocConfig, "macro_window")]

# The long-document flags, in the order --help lists them: (parameter, annotation, default).
_LONG_FLAGS: tuple[tuple[str, Any, Any], ...] = (
    ("long", LongOption, "default"),
    ("window", WindowOption, None),
    ("stride", StrideOption, None),
    ("best_windows", BestWindowsOption, None),
    ("scales", ScalesOption, None),
    ("fuse_mean", FuseOption, None),
    ("sentence_cuts", SentenceOption, False),
    ("macro_window", MacroOption, None),
)


def long_config(
    strategy: str,
    window: int | None = None,
    stride: int | None = None,
    best_windows: int | None = None,
    sentence_cuts: bool = False,
    macro: int | None = None,
    scales: str | None = None,
    fuse_mean: float | None = None,
) -> LongDocConfig:
    """The flags as a `LongDocConfig`: the named strategy's settings (``default`` → `RECOMMENDED`), with each
    flag given over them. Raises `LongDocError` naming the flag."""
    base = LongDocConfig.named(strategy)
    given = {
        "window": window,
        "stride": stride,
        "best_windows": best_windows,
        "sentence_cuts": sentence_cuts or None,
        "macro_window": macro,
        "scales": _ints(scales, "--scales") if scales else None,
        "fuse_mean": fuse_mean,
    }
    return base.updated(**{k: v for k, v in given.items() if v is not None})


def long_options(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with the long-document flags (--long, --window, … --macro-window) in place of its parameter
    ``long: LongDocConfig``, which it receives built by `long_config`; a bad value is a one-line error before
    the command runs. Every command that reads long documents takes the same flags this way."""
    hints = typing.get_type_hints(command, include_extras=True)  # the modules' annotations are strings
    own = [p.replace(annotation=hints[p.name]) for p in inspect.signature(command).parameters.values()]
    at = [p.name for p in own].index("long")
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    flags = [inspect.Parameter(name, keyword, annotation=kind, default=value) for name, kind, value in _LONG_FLAGS]

    def run(**values: Any) -> None:
        given = {name: values.pop(name) for name, _, _ in _LONG_FLAGS}
        try:
            config = long_config(given.pop("long"), macro=given.pop("macro_window"), **given)
        except LengthwiseError as err:  # LongDocError, or --scales that are not integers (SettingError)
            _fail(setting_message(err))
        command(long=config, **values)

    run.__signature__ = inspect.Signature([*own[:at], *flags, *own[at + 1 :]])  # type: ignore[attr-defined]
    run.__doc__, run.__name__ = command.__doc__, command.__name__
    return run


def _numbers(text: str, flag: str, kind: type, example: str) -> tuple:
    """`text`, comma-separated, as `kind`s; a `SettingError` naming `flag` (this command's own) otherwise."""
    try:
        values = tuple(kind(x) for x in text.split(",") if x.strip())
    except ValueError:
        words = "integers" if kind is int else "numbers"
        raise SettingError(
            None, None, f"{flag} {text!r} is not comma-separated {words}, e.g. {flag} {example}"
        ) from None
    if not values:
        raise SettingError(None, None, f"{flag} is empty; give at least one value")
    return values


def _ints(text: str, flag: str) -> tuple[int, ...]:
    return _numbers(text, flag, int, "64,128,256")


def _floats(text: str, flag: str) -> tuple[float, ...]:
    return _numbers(text, flag, float, "0,0.2")


def _scale_sets(text: str) -> tuple[tuple[int, ...], ...]:
    sets = [part.strip() for part in text.split(";") if part.strip()]
    if not sets:
        raise SettingError(None, None, "--scales is empty; give 'none' or sizes, e.g. --scales 'none;256'")
    return tuple(() if part.lower() == "none" else _ints(part, "--scales") for part in sets)


@app.command()
def synth(
    task: Annotated[str, typer.Option("--task", "-t", help="passkey or needle.")],
    haystack: Annotated[
        Path,
        typer.Option(
            "--haystack",
            help="Natural prose: a text file (plain or .gz), one paragraph per line, or a folder of .txt/.txt.gz "
            "files (e.g. data/essays in a checkout).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The BEIR folder to write.")],
    style: Annotated[
        str,
        typer.Option(
            "--style",
            help="realistic: each document its own prose, needles about names the haystack mentions, paraphrased "
            "queries; simple: LongEmbed's layout (one shared stretch per length, fixed names, literal queries).",
        ),
    ] = "realistic",
    model: ModelOption = DEFAULT_MODEL,
    lengths: Annotated[str, typer.Option("--lengths", help="Document lengths in tokens.")] = (
        "256,512,1024,2048,4096,8192,16384,32768"
    ),
    per_length: Annotated[int, typer.Option("--per-length", help="Documents (and queries) per length.")] = 50,
    seed: Annotated[int, typer.Option("--seed", help="Seed for stretches, needles and depths.")] = 0,
) -> None:
    """Write a seeded passkey or needle task as a BEIR folder with length groups (lengths in the model's tokens)."""
    from lengthwise.longdoc.tasks.run import synthesize

    try:
        check_out_dir(out)
        sizes = _ints(lengths, "--lengths")
        data = synthesize(task, haystack, out, model, style=style, lengths=sizes, per_length=per_length, seed=seed)
    except LengthwiseError as err:
        _fail(setting_message(err))
    groups = len(set(sizes))
    say(f"wrote {len(data.items)} documents in {groups} length group{'s' * (groups != 1)} to {out}")


@app.command("eval")
@long_options
def evaluate(
    data: Annotated[Path, typer.Option("--data", "-d", help="A folder written by `lengthwise longdoc synth`.")],
    long: LongDocConfig,
    model: ModelOption = DEFAULT_MODEL,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("lengthwise-longdoc"),
    batch_size: Annotated[int, typer.Option("--batch-size", help="Windows per forward pass.")] = 32,
    device: DeviceOption = None,
    precision: PrecisionOption = "fp32",
) -> None:
    """Score a synthetic task LongEmbed-style: rank within each length group; Acc@1 per length, mean, by depth."""
    from lengthwise.facade import load_model
    from lengthwise.longdoc.tasks.run import score_long_task

    quiet_loading()

    try:
        check_device(device)
        check_out_dir(out)
        result, record = score_long_task(data, model, load_model=load_model, long=long, out=out, batch_size=batch_size,
                                         device=device, precision=precision,
                                         show_progress=console.is_terminal)  # fmt: skip
    except LengthwiseError as err:
        _fail(setting_message(err))
    lengths = "  ".join(f"{k}: {v:.1f}" for k, v in result.by_length.items())
    task = record["provenance"]["data"].get("task", "task")
    console.print(f"{task} {long.describe()}: mean Acc@1 {result.mean:.2f}  ({lengths})", highlight=False)
    say(f"wrote {out / 'results.json'}")


@app.command()
def tune(
    data: Annotated[Path, typer.Option("--data", "-d", help="BEIR folder (tuned on --split) or a synth folder.")],
    model: ModelOption = DEFAULT_MODEL,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("lengthwise-longdoc-tune"),
    split: Annotated[str, typer.Option("--split", help="BEIR qrels split to tune on (train/dev).")] = "dev",
    strategies: Annotated[str, typer.Option("--strategies", help="Comma-separated strategies to try.")] = (
        "chunk-mean,chunk-weighted,multi-vector,late-chunking"
    ),
    windows: Annotated[str, typer.Option("--windows", help="Comma-separated windows (tokens, specials incl.).")] = (
        "64,128,256"
    ),
    overlaps: Annotated[str, typer.Option("--overlaps", help="Comma-separated window overlaps in [0, 1).")] = "0,0.5",
    best_windows: Annotated[
        str, typer.Option("--best-windows", help="multi-vector: comma-separated k to try (mean of the k best windows).")
    ] = "1",
    scales: Annotated[
        str,
        typer.Option(
            "--scales",
            help="multi-vector: extra window sizes to try, ';'-separated sets of comma-separated sizes, 'none' for "
            "one size, e.g. 'none;256'.",
        ),
    ] = "none",
    fuse_means: Annotated[
        str, typer.Option("--fuse-means", help="multi-vector: comma-separated mean-score weights in [0, 1] to try.")
    ] = "0",
    save: Annotated[
        Path | None, typer.Option("--save", help="Also save the model with the best choice to this folder.")
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Windows per forward pass.")] = 32,
    device: DeviceOption = None,
    precision: PrecisionOption = "fp32",
) -> None:
    """Choose strategy, window and stride on a dev split; write OUT/tune.json and OUT/tune.png.

    Truncation at the model's own window is always scored as the baseline. With --save the model is written
    with the best choice, and `lengthwise.load_model` / `LongEncoder(model)` pick it up from there.
    """
    from lengthwise.pipelines import tune_long_documents

    def report(config: LongDocConfig, score: float) -> None:
        console.print(f"{config.describe():<32} {score:.3f}", highlight=False)

    try:
        check_device(device)
        check_out_dir(out)
        try:
            shares = tuple(float(x) for x in overlaps.split(",") if x.strip())
        except ValueError:
            raise SettingError(
                None, None, f"--overlaps {overlaps!r} is not comma-separated fractions, e.g. 0,0.5"
            ) from None
        with console.status("tuning"):
            result, record = tune_long_documents(
                data, model, strategies=strategies.split(","), windows=_ints(windows, "--windows"), overlaps=shares,
                best_windows=_ints(best_windows, "--best-windows"), scales=_scale_sets(scales),
                fuse_means=_floats(fuse_means, "--fuse-means"), out=out, split=split, save=save,
                batch_size=batch_size, device=device, precision=precision,
                on_eval=report,
            )  # fmt: skip
    except LengthwiseError as err:
        _fail(setting_message(err))
    saved = f"; saved the model with it to {save}" if save is not None else ""
    say(
        f"best {result.best.describe()}: {record['metric']} {result.best_score:.3f} "
        f"(truncate: {result.baseline_score:.3f}){saved}; wrote {out / 'tune.json'}"
    )


@app.command()
@long_options
def save(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the model and its long-document choice.")],
    long: LongDocConfig,
    model: ModelOption = DEFAULT_MODEL,
    device: DeviceOption = None,
) -> None:
    """Save the model with a long-document choice; lengthwise's load_model and LongEncoder(model) use it."""
    from lengthwise.longdoc.persist import save_long_documents

    try:
        quiet_loading()
        with console.status(escape(f"loading {model}")):
            save_long_documents(model, long, out, device=device)
    except LengthwiseError as err:
        _fail(setting_message(err))
    say(f"wrote {out} with {long.describe()}")
