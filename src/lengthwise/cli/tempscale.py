"""`lengthwise tempscale`: tune the attention temperature on a dev split, bake it into weights, or save it.

Thin adapters from flags to `lengthwise.tempscale`, `lengthwise.tempscale.tune` and `lengthwise.evaluation`; heavy
imports happen inside the commands. The temperature and tuning flags take their help from the `TempScaleConfig`
and `TuneSpec` fields; a library error names the field and is shown with its flag. The device, the output folder
and (for ``bake``) the source model are checked before any model is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lengthwise.cli.app import command_group
from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail
from lengthwise.cli.options import (
    ModelOption,
    PrecisionOption,
    TrustOption,
    field_default,
    field_help,
    quiet_loading,
    setting_message,
)
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import LengthwiseError
from lengthwise.evaluation.config import Task
from lengthwise.tempscale.config import TempScaleConfig
from lengthwise.tempscale.tune import Side, TuneSpec

app = command_group("TempScale: divide attention logits by a temperature t (METHODS §2) — tune, bake or save it.")

_USUAL_T = (0.25, 4.0)  # outside it a temperature is allowed but unusual: the command says so


DeviceOption = Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:N, mps… Default: best available.")]
TQueryOption = Annotated[float | None, typer.Option("--t-query", help=field_help(TempScaleConfig, "t_query"))]
TDocOption = Annotated[float | None, typer.Option("--t-doc", help=field_help(TempScaleConfig, "t_doc"))]
ScheduleOption = Annotated[str | None, typer.Option("--schedule", help=field_help(TempScaleConfig, "schedule"))]


def _config(t: float, t_query: float | None, t_doc: float | None, schedule: str | None) -> TempScaleConfig:
    from lengthwise.tempscale.config import LengthSchedule

    parsed = LengthSchedule.parse(schedule) if schedule else None
    config = TempScaleConfig(t=t, t_query=t_query, t_doc=t_doc, schedule=parsed)
    unusual = [x for x in (t, t_query, t_doc) if x is not None and not _USUAL_T[0] <= x <= _USUAL_T[1]]
    if unusual:
        console.print(
            f"note: t = {unusual[0]:g} is far from the usual 0.5-1.5; check the value", highlight=False, markup=False
        )
    return config


def _checked_config(t: float, t_query: float | None, t_doc: float | None, schedule: str | None) -> TempScaleConfig:
    """`_config`, or a one-line error naming the flag."""
    from lengthwise.tempscale.config import TempScaleError

    try:
        return _config(t, t_query, t_doc, schedule)
    except TempScaleError as err:
        _fail(setting_message(err))


@app.command()
def families() -> None:
    """List the supported architectures and how TempScale reaches their attention."""
    from rich.console import Console
    from rich.table import Table

    from lengthwise.tempscale import FAMILIES

    table = Table(title="TempScale families", title_justify="left")
    for column in ("family", "model_type", "scalar t", "per-sequence t", "positions", "position bias scaled"):
        table.add_column(column)
    for f in FAMILIES:
        scalar = "`scaling` attribute" if f.scaling_attribute else f"hook on `{f.query}` output"
        bias = "yes (1/t, default)" if f.position_bias else "n/a (none)"
        table.add_row(f.name, ", ".join(f.model_types), scalar, f"hook on `{f.query}` output", f.positions, bias)
    Console().print(table)


@app.command()
def bake(
    t: Annotated[float, typer.Option("--t", help="The temperature to fold into the weights (t < 1 sharpens).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the sentence-transformers model.")],
    model: ModelOption = DEFAULT_MODEL,
    t_query: TQueryOption = None,
    t_doc: TDocOption = None,
    schedule: ScheduleOption = None,
    verify: Annotated[bool, typer.Option(help="Check baked vs run-time embeddings on the probe texts.")] = True,
    rebake: Annotated[
        bool,
        typer.Option("--rebake", help="Bake a model whose weights already carry a t (records the product of the t's)."),
    ] = False,
    device: DeviceOption = None,
    trust_remote_code: TrustOption = False,
) -> None:
    """Write a plain sentence-transformers model whose weights carry 1/t; refuse where that is not exact.

    The query projections (and MPNet's relative position bias) are divided by t, so the directory loads with
    plain sentence-transformers. Length schedules and query ≠ document temperatures cannot be baked; --out must
    not be the model itself, and an already-baked model needs --rebake.
    """
    config = _checked_config(t, t_query, t_doc, schedule)  # before anything heavy is imported
    from lengthwise.cli.options import check_device
    from lengthwise.tempscale.persist import bake as bake_model

    try:
        check_device(device)
        quiet_loading()
        result = bake_model(
            model, config, out, rebake=rebake, verify=verify, device=device, trust_remote_code=trust_remote_code
        )
    except LengthwiseError as err:  # TempScaleError, SettingError, ModelLoadError
        _fail(setting_message(err))
    _note_ignored(model, result.ignored)
    if result.max_difference is not None:
        console.print(f"max |baked − run-time| over the probe texts: {result.max_difference:.2e}", highlight=False)
    product = " × ".join(f"{x:g}" for x in result.steps)
    recorded = f"t = {result.t:g}" + (f" (= {product})" if len(result.steps) > 1 else "")
    console.print(
        f"wrote {out} ({recorded}); load it with SentenceTransformer({str(out)!r})", highlight=False, markup=False
    )


def _note_ignored(model: str, ignored: str | None) -> None:
    if ignored is not None:
        console.print(f"note: ignoring the TempScale settings saved with {model} ({ignored})", highlight=False,
                      markup=False)  # fmt: skip


@app.command()
def save(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the model and its TempScale settings.")],
    t: Annotated[float, typer.Option("--t", help=field_help(TempScaleConfig, "t"))],
    model: ModelOption = DEFAULT_MODEL,
    t_query: TQueryOption = None,
    t_doc: TDocOption = None,
    schedule: ScheduleOption = None,
    device: DeviceOption = None,
    trust_remote_code: TrustOption = False,
) -> None:
    """Save the model with its TempScale settings; lengthwise's load_model re-applies them.

    Any configuration can be saved, schedules and query/document temperatures included. The weights are the
    original ones, so a plain sentence-transformers load gives the untouched model.
    """
    config = _checked_config(t, t_query, t_doc, schedule)
    from lengthwise.cli.options import check_device
    from lengthwise.tempscale.persist import save_tempscaled

    try:
        check_device(device)
        quiet_loading()
        ignored = save_tempscaled(model, config, out, device=device, trust_remote_code=trust_remote_code)
    except LengthwiseError as err:  # TempScaleError, SettingError, ModelLoadError
        _fail(setting_message(err))
    _note_ignored(model, ignored)
    console.print(f"wrote {out} with {config}", highlight=False, markup=False)


@app.command()
def tune(
    task: Annotated[Task, typer.Option("--task-type", "-t", help="sts, retrieval or classification.")],
    data: Annotated[
        Path, typer.Option("--data", "-d", help="STS dev file/SentEval folder; BEIR folder; train/test.jsonl folder.")
    ],
    model: ModelOption = DEFAULT_MODEL,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("lengthwise-tempscale"),
    split: Annotated[str, typer.Option("--split", help="Retrieval: qrels split to tune on (train/dev).")] = "dev",
    grid: Annotated[
        str, typer.Option("--grid", help=field_help(TuneSpec, "grid") + " Comma-separated; '' for none.")
    ] = (",".join(f"{x:g}" for x in field_default(TuneSpec, "grid"))),
    search: Annotated[bool, typer.Option(help=field_help(TuneSpec, "search"))] = field_default(TuneSpec, "search"),
    bounds: Annotated[tuple[float, float] | None, typer.Option("--bounds", help=field_help(TuneSpec, "bounds"))] = None,
    xatol: Annotated[float, typer.Option("--xatol", help=field_help(TuneSpec, "xatol"))] = field_default(
        TuneSpec, "xatol"
    ),
    max_evals: Annotated[int, typer.Option("--max-evals", help=field_help(TuneSpec, "max_evals"))] = field_default(
        TuneSpec, "max_evals"
    ),
    side: Annotated[Side, typer.Option("--side", help=field_help(TuneSpec, "side"))] = field_default(TuneSpec, "side"),
    max_items: Annotated[
        int | None, typer.Option("--max-items", help="Seeded sample of STS pairs / classification texts.")
    ] = None,
    max_length: Annotated[int | None, typer.Option("--max-length", help="Model max length N (specials incl.).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Texts per forward pass.")] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Seed for sampling and splits.")] = 0,
    device: DeviceOption = None,
    trust_remote_code: TrustOption = False,
    precision: PrecisionOption = "fp32",
) -> None:
    """Pick t on a dev split by grid and bounded 1-D search; write the curve and the best t.

    Metrics: STS Spearman, retrieval nDCG@10 (a train/dev qrels split) or classification accuracy (fit on one
    stratified half of train, scored on the other). Writes OUT/tune.json (curve, best t, settings, model and
    data fingerprints, versions) and OUT/tune.png.
    """
    from lengthwise.tempscale.config import TempScaleError

    try:
        values = tuple(float(x) for x in grid.split(",") if x.strip())
    except ValueError:
        _fail(f"--grid {grid!r} is not comma-separated temperatures, e.g. --grid 0.6,0.8,1.0")
    try:  # the settings first: a bad one costs no import of torch
        spec = TuneSpec(grid=values, search=search, bounds=bounds, xatol=xatol, max_evals=max_evals, side=side)
    except TempScaleError as err:
        _fail(setting_message(err))
    from lengthwise.cli.options import check_device, check_out_dir
    from lengthwise.pipelines import tune_tempscale

    def note(line: str) -> None:
        console.print(line, highlight=False, markup=False)

    def report(t: float, score: float) -> None:
        note(f"t = {t:.4f}  {task.metric} = {score:.3f}")

    try:
        check_device(device)
        check_out_dir(out)  # before the model loads and the dev data is scored: nothing is lost to a bad --out
        quiet_loading()
        with console.status("tuning"):
            record = tune_tempscale(task, data, model, spec=spec, out=out, split=split, max_items=max_items,
                                    batch_size=batch_size, seed=seed, device=device, max_length=max_length,
                                    trust_remote_code=trust_remote_code, precision=precision, on_note=note,
                                    on_eval=report)  # fmt: skip
    except LengthwiseError as err:  # TempScaleError, DataFormatError, ModelLoadError
        _fail(setting_message(err))
    result = record["result"]
    console.print(
        f"best t = {result['best_t']:.4f}: {task.metric} {result['best_score']:.3f} "
        f"(t = 1: {result['baseline_score']:.3f}); wrote {out / 'tune.json'} and {out / 'tune.png'}",
        highlight=False,
        markup=False,
    )
