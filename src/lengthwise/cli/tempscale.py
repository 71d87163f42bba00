"""`lengthwise tempscale`: tune the attention temperature on a dev split, bake it into weights, or save it.

Thin adapters from flags to `lengthwise.tempscale`, `lengthwise.tempscale.tune` and `lengthwise.evaluation`;
heavy imports happen inside the commands.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.tempscale import TempScaleConfig

from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail
from lengthwise.core.defaults import DEFAULT_MODEL

app = typer.Typer(
    help="TempScale: divide attention logits by a temperature t (METHODS §2) — tune, bake or save it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ModelOption = Annotated[str, typer.Option("--model", "-m", help="Model directory or Hugging Face id.")]
DeviceOption = Annotated[str | None, typer.Option("--device", help="cpu, cuda, mps… Default: best available.")]
TQueryOption = Annotated[float | None, typer.Option("--t-query", help="Temperature for queries (default: t).")]
TDocOption = Annotated[float | None, typer.Option("--t-doc", help="Temperature for documents (default: t).")]
ScheduleOption = Annotated[
    str | None, typer.Option("--schedule", help="Length factors LENGTH:FACTOR,… multiplying t, e.g. 64:1.0,512:0.7.")
]


class Task(str, Enum):
    sts = "sts"
    retrieval = "retrieval"
    classification = "classification"


class Side(str, Enum):
    both = "both"
    query = "query"
    document = "document"


_METRIC = {Task.sts: "spearman", Task.retrieval: "ndcg@10", Task.classification: "accuracy"}


def _config(t: float, t_query: float | None, t_doc: float | None, schedule: str | None) -> TempScaleConfig:
    from lengthwise.tempscale import LengthSchedule, TempScaleConfig

    parsed = LengthSchedule.parse(schedule) if schedule else None
    return TempScaleConfig(t=t, t_query=t_query, t_doc=t_doc, schedule=parsed)


def _load(model: str, device: str | None, max_length: int | None = None) -> SentenceTransformer:
    from transformers.utils import logging as hf_logging

    from lengthwise.facade import load_model
    from lengthwise.tempscale import remove_tempscale

    hf_logging.disable_progress_bar()  # weight loading is instant; keep the output to what matters
    loaded = load_model(model, device=device, max_seq_length=max_length)
    previous = remove_tempscale(loaded)  # start from the untouched model
    if previous is not None:
        console.print(f"note: ignoring the TempScale settings saved with {model} ({previous})", highlight=False)
    return loaded


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
    device: DeviceOption = None,
) -> None:
    """Write a plain sentence-transformers model whose weights carry 1/t; refuse where that is not exact.

    The query projections (and MPNet's relative position bias) are divided by t, so the directory loads with
    plain sentence-transformers. Length schedules and query ≠ document temperatures cannot be baked.
    """
    from lengthwise.core.models import ModelLoadError
    from lengthwise.tempscale import TempScaleError, bake_tempscale

    try:
        config = _config(t, t_query, t_doc, schedule)
        loaded = _load(model, device)
        bake_tempscale(loaded, config, out)
        if verify:
            diff = _verify_bake(loaded, config, out)
            console.print(f"max |baked − run-time| over the probe texts: {diff:.2e}", highlight=False)
            if diff > 1e-5:
                _fail(f"baked weights differ from the run-time patch by {diff:.2e} (> 1e-5); do not use {out}")
    except (TempScaleError, ModelLoadError) as err:
        _fail(str(err))
    console.print(f"wrote {out} (t = {t}); load it with SentenceTransformer({str(out)!r})", highlight=False)


def _verify_bake(model: SentenceTransformer, config: TempScaleConfig, out: Path) -> float:
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.data import default_probe_pairs
    from lengthwise.tempscale import tempscale

    texts = sorted({p.text1 for p in default_probe_pairs().pairs})[:64]
    with tempscale(model, config):
        patched = model.encode(texts, convert_to_numpy=True)
    baked = SentenceTransformer(str(out), device=str(model.device)).encode(texts, convert_to_numpy=True)
    return float(np.abs(baked - patched).max())


@app.command()
def save(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the model and its TempScale settings.")],
    t: Annotated[float, typer.Option("--t", help="Temperature for symmetric encode (and the default elsewhere).")],
    model: ModelOption = DEFAULT_MODEL,
    t_query: TQueryOption = None,
    t_doc: TDocOption = None,
    schedule: ScheduleOption = None,
    device: DeviceOption = None,
) -> None:
    """Save the model with its TempScale settings; lengthwise's load_model re-applies them.

    Any configuration can be saved, schedules and query/document temperatures included. The weights are the
    original ones, so a plain sentence-transformers load gives the untouched model.
    """
    from lengthwise.core.models import ModelLoadError
    from lengthwise.tempscale import TempScaleError, save_tempscale, tempscale

    try:
        config = _config(t, t_query, t_doc, schedule)
        loaded = _load(model, device)
        with tempscale(loaded, config):
            save_tempscale(loaded, out)
    except (TempScaleError, ModelLoadError) as err:
        _fail(str(err))
    console.print(f"wrote {out} with {config}", highlight=False)


def _objective(task: Task, data: Path, split: str, model: SentenceTransformer, opts: dict[str, Any]) -> tuple:
    """(objective, data description) for a task on its dev data, scored through `lengthwise.evaluation`."""
    from lengthwise import evaluation as ev
    from lengthwise.tempscale import TempScaleEncoder

    batch = opts["batch_size"]
    if task is Task.sts:
        pairs = ev.read_sts(data)
        pairs = pairs.sample(opts["max_items"], opts["seed"]) if opts["max_items"] else pairs

        def sts(config: TempScaleConfig) -> float:
            score = ev.evaluate_sts(TempScaleEncoder(model, config), pairs, batch_size=batch).scores["spearman"]
            return float("nan") if score is None else score

        return sts, {"source": pairs.source, "n_pairs": len(pairs), "sha256": pairs.sha256}
    if task is Task.retrieval:
        beir = ev.read_beir(data, split)

        def retrieval(config: TempScaleConfig) -> float:
            return ev.evaluate_retrieval(TempScaleEncoder(model, config), beir, batch_size=batch).scores["ndcg@10"]

        return retrieval, beir.describe()
    from sklearn.model_selection import train_test_split

    train, _ = ev.read_classification(data)  # the test split is never looked at while tuning
    train = train.stratified_sample(opts["max_items"], opts["seed"]) if opts["max_items"] else train
    fit, dev = train_test_split(range(len(train)), test_size=0.5, random_state=opts["seed"], stratify=train.labels)
    fit_set, dev_set = train.subset(sorted(fit), "tune: fit half"), train.subset(sorted(dev), "tune: dev half")
    settings = ev.ClassificationConfig(few_shot=(), seed=opts["seed"])

    def classification(config: TempScaleConfig) -> float:
        encoder = TempScaleEncoder(model, config)
        return ev.evaluate_classification(encoder, fit_set, dev_set, settings, batch_size=batch).scores["accuracy"]

    return classification, {"train": train.describe(), "dev": "a stratified half of train (the other half fits)"}


@app.command()
def tune(
    task: Annotated[Task, typer.Option("--task", "-t", help="sts, retrieval or classification.")],
    data: Annotated[
        Path, typer.Option("--data", "-d", help="STS dev file/SentEval folder; BEIR folder; train/test.jsonl folder.")
    ],
    model: ModelOption = DEFAULT_MODEL,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("lengthwise-tempscale"),
    split: Annotated[str, typer.Option("--split", help="Retrieval: qrels split to tune on (train/dev).")] = "dev",
    grid: Annotated[str, typer.Option("--grid", help="Comma-separated temperatures; '' for none.")] = (
        "0.5,0.6,0.7,0.8,0.9,1.0"
    ),
    search: Annotated[bool, typer.Option(help="Refine by a bounded 1-D search after the grid.")] = True,
    bounds: Annotated[
        tuple[float, float] | None,
        typer.Option("--bounds", help="Search interval LOW HIGH (default: grid neighbours)."),
    ] = None,
    xatol: Annotated[float, typer.Option("--xatol", help="Search tolerance on t.")] = 0.01,
    max_evals: Annotated[int, typer.Option("--max-evals", help="Most evaluations the search may add.")] = 10,
    side: Annotated[Side, typer.Option("--side", help="Tune t (both), t_query or t_doc.")] = Side.both,
    max_items: Annotated[
        int | None, typer.Option("--max-items", help="Seeded sample of STS pairs / classification texts.")
    ] = None,
    max_length: Annotated[int | None, typer.Option("--max-length", help="Model max length N (specials incl.).")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Texts per forward pass.")] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Seed for sampling and splits.")] = 0,
    device: DeviceOption = None,
) -> None:
    """Pick t on a dev split by grid and bounded 1-D search; write the curve and the best t.

    Metrics: STS Spearman, retrieval nDCG@10 (a train/dev qrels split) or classification accuracy (fit on one
    stratified half of train, scored on the other). Writes OUT/tune.json (curve, best t, settings, model and
    data fingerprints, versions) and OUT/tune.png.
    """
    from lengthwise.core.models import ModelLoadError, model_fingerprint
    from lengthwise.core.results import environment, write_json_atomic
    from lengthwise.tempscale.tune import TuneSpec, plot_tune_curve, tune_temperature

    try:
        values = tuple(float(x) for x in grid.split(",") if x.strip())
    except ValueError:
        _fail(f"--grid {grid!r} is not comma-separated temperatures, e.g. --grid 0.6,0.8,1.0")
        return
    try:
        spec = TuneSpec(grid=values, search=search, bounds=bounds, xatol=xatol, max_evals=max_evals, side=side.value)
        loaded = _load(model, device, max_length)
        opts = {"batch_size": batch_size, "max_items": max_items, "seed": seed}
        objective, described = _objective(task, data, split, loaded, opts)
        with console.status("tuning") as status:

            def report(t: float, score: float) -> None:
                console.print(f"t = {t:.4f}  {_METRIC[task]} = {score:.3f}", highlight=False)
                status.update(f"tuning: {t:.4f} done")

            result = tune_temperature(objective, spec, on_eval=report)
    except (ValueError, ModelLoadError) as err:  # TempScaleError and DataFormatError are ValueErrors naming the fix
        _fail(str(err))
        return
    payload = {
        "task": task.value,
        "metric": _METRIC[task],
        "settings": {
            "grid": list(spec.grid),
            "search": search,
            "bounds": bounds,
            "xatol": xatol,
            "max_evals": max_evals,
            "side": side.value,
            "split": split,
        }
        | opts,
        "result": result.to_dict(),
        "model": model_fingerprint(loaded, model),
        "data": described,
        "environment": environment(),
    }
    write_json_atomic(out / "tune.json", payload)
    plot_tune_curve(result, _METRIC[task]).savefig(out / "tune.png", dpi=120)
    console.print(
        f"best t = {result.best_t:.4f}: {_METRIC[task]} {result.best_score:.3f} "
        f"(t = 1: {result.baseline_score:.3f}); wrote {out / 'tune.json'} and {out / 'tune.png'}",
        highlight=False,
    )
