"""`lengthwise audit`: the elongation attack and the document diagnostics, flags to library calls."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lengthwise.cli.app import app
from lengthwise.cli.console import console
from lengthwise.cli.console import fail as _fail
from lengthwise.core.defaults import DEFAULT_MODEL

if TYPE_CHECKING:  # rich.progress and rich.table load when a command runs, not for `lengthwise --help`
    from rich.table import Table


class Preset(str, Enum):
    """Paper settings one flag away (METHODS §1)."""

    stsb = "stsb"  # m = 100, capped by N (laser3 / length-attack on STS-B)
    first64x8 = "first64x8"  # first 64 tokens vs 8 copies at N = 512 (length-attack on ArguAna)


def _summary_table(payload: dict) -> Table:
    from rich.table import Table

    attack = payload["attack"]
    table = Table(title=f"Elongation attack — {payload['model']['name']}", title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("pairs", f"{attack['n']}"),
        ("elongation m", f"{attack['elongation']} (mean m used {payload['tokens']['m_mean']:.1f})"),
        ("mean cosine before → after", f"{attack['mean_before']:.4f} → {attack['mean_after']:.4f}"),
        ("median cosine before → after", f"{attack['median_before']:.4f} → {attack['median_after']:.4f}"),
        ("mean shift", f"{attack['mean_shift']:+.4f}"),
        ("fraction of pairs risen", f"{attack['frac_increased']:.1%}"),
        ("Jensen–Shannon distance", f"{attack['js_distance']:.4f}"),
    ]
    if null := attack.get("js_null"):
        rows.append(("JSD if nothing changed: mean / 95%", f"{null['mean']:.4f} / {null['q95']:.4f}"))
        rows.append(("JSD permutation p-value", f"{null['p_value']:.3f}"))
    shuffle = payload.get("word_shuffle")
    if shuffle:
        rows.append(("word-shuffle JSD", f"{shuffle['js_distance']:.4f}"))
    for row in payload.get("first_k_curve", []):
        rows.append((f"first {row['k']} tokens: mean cosine", f"{row['mean']:.4f}"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def _diagnostics(docs: Path | None, run_all: bool, switches: dict[str, bool]) -> tuple[str, ...]:
    """The document diagnostics the flags ask for: --all (or --docs alone) means every one of them."""
    from lengthwise.audit.documents import DIAGNOSTICS

    chosen = tuple(name for name, on in switches.items() if on)
    if run_all or (docs is not None and not chosen):
        chosen = DIAGNOSTICS
    needs_docs = [name for name in chosen if name != "words_curve"]
    if needs_docs and docs is None:
        flag = "--all" if run_all else f"--{needs_docs[0].replace('_', '-')}"
        raise ValueError(f"{flag} needs documents: pass --docs FILE (JSONL with a 'text' field, or one per line)")
    return chosen


def _diagnostics_table(section: dict) -> Table:
    from rich.table import Table

    from lengthwise.audit.report.documents import summary_rows

    table = Table(title="Document diagnostics", title_justify="left")
    table.add_column("diagnostic")
    table.add_column("finding")
    for name, value in summary_rows(section):
        table.add_row(name, value)
    return table


@app.command()
def audit(
    model: Annotated[str, typer.Option("--model", "-m", help="Model directory or Hugging Face id.")] = DEFAULT_MODEL,
    pairs: Annotated[
        Path | None,
        typer.Option(
            "--pairs",
            "-p",
            help="Text pairs: STS TSV/CSV, JSONL (text1/text2), or a BEIR folder. Default: the embedded probe set.",
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("lengthwise-audit"),
    elongate: Annotated[
        str,
        typer.Option("--elongate", "-e", help="Copies m per text: an integer (capped by N), 'random' or 'twice'."),
    ] = "100",
    first_k: Annotated[
        int | None,
        typer.Option(
            "--first-k",
            help="Truncate every pair text (and, unless --docs-first-k says otherwise, every document) to its "
            "first k tokens (specials included) first.",
        ),
    ] = None,
    docs_first_k: Annotated[
        int | None,
        typer.Option(
            "--docs-first-k",
            help="Truncate every document to its first k tokens (specials included); 0 = no cut. "
            "Default: --first-k's value. --preset first64x8 cuts the pairs only.",
        ),
    ] = None,
    max_length: Annotated[
        int | None,
        typer.Option("--max-length", help="Model max length N (specials included); default: the model's."),
    ] = None,
    preset: Annotated[
        Preset | None,
        typer.Option("--preset", help="stsb: m=100; first64x8: first 64 tokens vs 8 copies at N=512."),
    ] = None,
    curve_k: Annotated[
        list[int] | None, typer.Option("--curve-k", help="Lengths k of the first-k curve (repeatable).")
    ] = None,
    no_curve: Annotated[bool, typer.Option("--no-curve", help="Skip the first-k (semantic-altered) curve.")] = False,
    no_shuffle: Annotated[bool, typer.Option("--no-shuffle", help="Skip the word-shuffle probe.")] = False,
    bins: Annotated[int, typer.Option("--bins", help="Histogram bins over [-1, 1] for the JS distance.")] = 100,
    max_pairs: Annotated[
        int | None, typer.Option("--max-pairs", help="Use at most this many pairs (seeded sample).")
    ] = None,
    null_permutations: Annotated[
        int,
        typer.Option("--null-permutations", help="Within-pair swaps for the JSD's noise level and p-value; 0 = skip."),
    ] = 200,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Sequences per forward pass.")] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Seed for sampling, random m and word shuffles.")] = 0,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda, mps… Default: best available.")] = None,
    trust_remote_code: Annotated[
        bool, typer.Option("--trust-remote-code", help="Allow the model repository's own code to run.")
    ] = False,
    docs: Annotated[
        Path | None,
        typer.Option("--docs", help="Documents for the diagnostics: JSONL with a 'text' field, or one per line."),
    ] = None,
    run_all: Annotated[bool, typer.Option("--all", help="Run every document diagnostic below (needs --docs).")] = False,
    probe: Annotated[bool, typer.Option("--probe", help="Length probe: 5-fold CV R²×100, embedding → length.")] = False,
    intra: Annotated[
        bool, typer.Option("--intra", help="Intra-document similarity per layer, original vs elongated.")
    ] = False,
    isotropy: Annotated[
        bool, typer.Option("--isotropy", help="Anisotropy, alignment and uniformity, original vs elongated, by bin.")
    ] = False,
    collapse: Annotated[
        bool, typer.Option("--collapse", help="Length collapse by bin: pairwise cosine, distance to centroid.")
    ] = False,
    words_curve: Annotated[
        bool, typer.Option("--words-curve", help="Two unrelated words repeated k times (needs no --docs).")
    ] = False,
    attention: Annotated[
        bool, typer.Option("--attention", help="Attention filter rate σ_a by length bin (last layer).")
    ] = False,
    attention_all_layers: Annotated[
        bool, typer.Option("--attention-all-layers", help="σ_a of every layer (implies --attention).")
    ] = False,
    attention_per_bin: Annotated[
        int, typer.Option("--attention-per-bin", help="Documents per length bin in the σ_a pass; 0 = all.")
    ] = 100,
    max_docs: Annotated[
        int, typer.Option("--max-docs", help="Use at most this many documents (seeded sample); 0 = all.")
    ] = 2000,
    bin_width: Annotated[
        int | None, typer.Option("--bin-width", help="Length-bin width in tokens; default N/8 (32 at N=256).")
    ] = None,
) -> None:
    """Audit a model with the elongation attack: similarity before/after copying texts m times (METHODS §1).

    With --docs (and --all or single switches) also runs the document diagnostics of METHODS §1 over a
    collection. Writes OUT/audit.json (every figure, settings, model/data fingerprints, versions), PNG
    plots and a self-contained OUT/report.html, and prints a summary table.
    """
    from transformers.utils import logging as hf_logging

    from lengthwise.audit.attack import AuditConfig, run_audit
    from lengthwise.audit.documents import DocAuditConfig, read_docs, run_doc_audit
    from lengthwise.audit.report.attack import write_report
    from lengthwise.audit.shift import HistogramSpec
    from lengthwise.core.data import DataFormatError, default_probe_pairs, read_pairs
    from lengthwise.core.models import ModelLoadError
    from lengthwise.core.results import write_json_atomic
    from lengthwise.core.tokens import Elongation
    from lengthwise.facade import load_model

    hf_logging.disable_progress_bar()  # our own progress bar covers the work; weight loading is instant
    doc_first_k = first_k if docs_first_k is None else (docs_first_k or None)  # before the preset: it cuts pairs only
    if preset is Preset.first64x8:
        first_k, elongate, max_length = first_k or 64, "8", max_length or 512
    elif preset is Preset.stsb:
        elongate = "100"
    try:
        config = AuditConfig(
            elongation=Elongation.parse(elongate),
            first_k=first_k,
            curve_ks=() if no_curve else tuple(curve_k or (16, 32, 64, 128, 256, 512)),
            word_shuffle=not no_shuffle,
            histogram=HistogramSpec(bins=bins),
            null_permutations=null_permutations,
            batch_size=batch_size,
            seed=seed,
        )
        pair_set = read_pairs(pairs, max_pairs=max_pairs or 2000, seed=seed) if pairs else default_probe_pairs()
        if max_pairs is not None:
            pair_set = pair_set.sample(max_pairs, seed)
        switches = dict(probe=probe, intra=intra, isotropy=isotropy, collapse=collapse, words_curve=words_curve)
        chosen = _diagnostics(docs, run_all, {**switches, "attention": attention or attention_all_layers})
        doc_config = None
        if chosen:
            doc_config = DocAuditConfig(
                diagnostics=chosen,
                bin_width=bin_width,
                elongation=config.elongation,
                first_k=doc_first_k,
                attention_per_bin=attention_per_bin or None,
                attention_layers="all" if attention_all_layers else "last",
                batch_size=batch_size,
                seed=seed,
            )
        doc_set = read_docs(docs, max_docs=max_docs or None, seed=seed) if docs is not None else None
        with console.status(f"loading {model}"):
            encoder = load_model(model, device=device, trust_remote_code=trust_remote_code, max_seq_length=max_length)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task(f"embedding {len(pair_set)} pairs", total=None)

            def on_progress(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            result = run_audit(encoder, pair_set, config, model_name=model, on_progress=on_progress)
            section = None
            if doc_config is not None:

                def on_stage(stage: str, done: int, total: int) -> None:
                    progress.update(task, description=f"diagnostics: {stage}", completed=done, total=total)

                section = run_doc_audit(encoder, doc_set, doc_config, on_progress=on_stage)
    except (ValueError, ModelLoadError, DataFormatError) as err:
        _fail(str(err))
        return
    payload = result.to_dict()
    if section is not None:
        payload["diagnostics"] = section
    write_json_atomic(out / "audit.json", payload)
    written = write_report(payload, out)
    console.print(_summary_table(payload))
    if section is not None:
        console.print(_diagnostics_table(section))
    console.print(f"wrote {out / 'audit.json'} and {written['html']}", highlight=False)
