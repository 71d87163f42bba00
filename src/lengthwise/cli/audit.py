"""`lengthwise audit`: flags → `AuditJob` → `lengthwise.audit.run.run_full_audit` → a summary table.

Help texts and defaults come from the config dataclasses (`lengthwise.audit.config`), so flags and library
cannot drift; a `SettingError` names a config field, which `_flag` turns back into the flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lengthwise.audit.config import AttentionLayers, AuditConfig, AuditJob, Diagnostic, DocAuditConfig, HistogramSpec
from lengthwise.audit.pairs.presets import Preset
from lengthwise.audit.retrieval.config import RetrievalAuditConfig
from lengthwise.cli.console import console, escape, fail, say
from lengthwise.cli.options import (
    DeviceOption,
    ModelOption,
    PrecisionOption,
    field_default,
    field_option,
    setting_message,
)
from lengthwise.core.defaults import DEFAULT_MODEL
from lengthwise.core.errors import LengthwiseError, SettingError

if TYPE_CHECKING:  # rich.table loads when a command runs, not for `lengthwise --help`
    from rich.table import Table


def _summary_table(payload: Any) -> Table:
    from rich.table import Table

    attack = payload["attack"]
    table = Table(title=f"Elongation attack — {escape(str(payload['model']['name']))}", title_justify="left")
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
    if shuffle := payload.get("word_shuffle"):
        rows.append(("word-shuffle JSD", f"{shuffle['js_distance']:.4f}"))
    for row in payload.get("first_k_curve", []):
        rows.append((f"first {row['k']} tokens: mean cosine", f"{row['mean']:.4f}"))
    for name, value in rows:
        table.add_row(escape(name), escape(value))
    return table


def _diagnostics_table(section: Any) -> Table:
    from rich.table import Table

    from lengthwise.audit.report import summary_rows

    table = Table(title="Document diagnostics", title_justify="left")
    table.add_column("diagnostic")
    table.add_column("finding")
    for name, value in summary_rows(section):
        table.add_row(escape(name), escape(value))
    return table


def _diagnostics(docs: Path | None, run_all: bool, switches: dict[Diagnostic, bool]) -> tuple[Diagnostic, ...]:
    """The document diagnostics the flags ask for: --all (or --docs alone) means every one of them."""
    chosen = tuple(name for name, on in switches.items() if on)
    if run_all or (docs is not None and not chosen):
        chosen = tuple(Diagnostic)
    needs_docs = [name for name in chosen if name.needs_documents]
    if needs_docs and docs is None:
        flag = "--all" if run_all else f"--{needs_docs[0].value.replace('_', '-')}"
        fail(f"{flag} needs documents: pass --docs FILE (JSONL with a 'text' field, or one per line)")
    return chosen


def _doc_config(flags: dict[str, Any], elongation: Any) -> DocAuditConfig | None:
    """The document diagnostics' settings, or None when no diagnostic is asked for."""
    chosen = _diagnostics(flags["docs"], flags["run_all"], flags["switches"])
    if not chosen:
        return None
    doc_first_k = flags["first_k"] if flags["docs_first_k"] is None else (flags["docs_first_k"] or None)
    return DocAuditConfig(
        diagnostics=chosen,
        bin_width=flags["bin_width"],
        elongation=elongation,
        first_k=doc_first_k,
        attention_per_bin=flags["attention_per_bin"] or None,
        attention_layers=AttentionLayers.ALL if flags["attention_all_layers"] else AttentionLayers.LAST,
        batch_size=flags["batch_size"],
        seed=flags["seed"],
    )


def _job(flags: dict[str, Any]) -> AuditJob:
    """Flags → the audit's settings (`SettingError` names the field)."""
    from lengthwise.audit.pairs.presets import apply_preset
    from lengthwise.core.tokens import Elongation

    elongate, first_k, max_length = apply_preset(flags["preset"], flags["elongate"], flags["first_k"], None)
    flags["max_length"] = flags["max_length"] or max_length
    try:
        elongation = Elongation.parse(elongate)
    except ValueError as error:
        raise SettingError("elongation", elongate, "use a positive integer, 'random' or 'twice'") from error
    attack = AuditConfig(
        elongation=elongation,
        first_k=first_k,
        curve_ks=() if flags["no_curve"] else tuple(flags["curve_k"] or field_default(AuditConfig, "curve_ks")),
        word_shuffle=not flags["no_shuffle"],
        histogram=HistogramSpec(bins=flags["bins"]),
        null_permutations=flags["null_permutations"],
        batch_size=flags["batch_size"],
        seed=flags["seed"],
    )
    asked = [name.strip() for value in flags["retrieval_search"] or [] for name in value.split(",")]
    if asked and flags["retrieval"] is None:
        raise SettingError("retrieval_data", None, "--retrieval-search audits a BEIR folder: add --retrieval DIR")
    searches = tuple(dict.fromkeys(["dense", *asked]))
    retrieval = RetrievalAuditConfig(max_pairs=flags["retrieval_pairs"], window=flags["retrieval_window"],
                                     batch_size=flags["batch_size"], seed=flags["seed"], searches=searches)  # fmt: skip
    return AuditJob(out=flags["out"], pairs=flags["pairs"], max_pairs=flags["max_pairs"], docs=flags["docs"],
                    max_docs=flags["max_docs"] or None, attack=attack, diagnostics=_doc_config(flags, elongation),
                    retrieval_data=flags["retrieval"], retrieval_split=flags["retrieval_split"],
                    retrieval=retrieval)  # fmt: skip


def audit(
    model: ModelOption = DEFAULT_MODEL,
    pairs: Annotated[Path | None, field_option(AuditJob, "pairs", "--pairs", "-p")] = None,
    out: Annotated[Path, field_option(AuditJob, "out", "--out", "-o")] = field_default(AuditJob, "out"),
    elongate: Annotated[str, field_option(AuditConfig, "elongation", "--elongate", "-e")] = "100",
    first_k: Annotated[int | None, field_option(AuditConfig, "first_k")] = None,
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
    curve_k: Annotated[list[int] | None, field_option(AuditConfig, "curve_ks", "--curve-k")] = None,
    no_curve: Annotated[bool, typer.Option("--no-curve", help="Skip the first-k (semantic-altered) curve.")] = False,
    no_shuffle: Annotated[bool, typer.Option("--no-shuffle", help="Skip the word-shuffle probe.")] = False,
    bins: Annotated[int, field_option(HistogramSpec, "bins")] = field_default(HistogramSpec, "bins"),
    max_pairs: Annotated[int | None, field_option(AuditJob, "max_pairs")] = None,
    null_permutations: Annotated[int, field_option(AuditConfig, "null_permutations")] = field_default(
        AuditConfig, "null_permutations"
    ),
    batch_size: Annotated[int, field_option(AuditConfig, "batch_size")] = field_default(AuditConfig, "batch_size"),
    seed: Annotated[int, field_option(AuditConfig, "seed")] = field_default(AuditConfig, "seed"),
    device: DeviceOption = None,
    precision: PrecisionOption = "fp32",
    trust_remote_code: Annotated[
        bool,
        typer.Option(
            "--trust-remote-code", help="Allow the model repository's own Python code to run (only for code you trust)."
        ),
    ] = False,
    docs: Annotated[Path | None, field_option(AuditJob, "docs")] = None,
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
    attention_per_bin: Annotated[int, field_option(DocAuditConfig, "attention_per_bin")] = field_default(
        DocAuditConfig, "attention_per_bin"
    ),
    max_docs: Annotated[int, field_option(AuditJob, "max_docs")] = field_default(AuditJob, "max_docs"),
    bin_width: Annotated[int | None, field_option(DocAuditConfig, "bin_width")] = None,
    retrieval: Annotated[
        Path | None,
        typer.Option(
            "--retrieval",
            help="A BEIR folder (corpus, queries, qrels/SPLIT.tsv): also audit retrieval length bias (METHODS §6).",
        ),
    ] = None,
    retrieval_split: Annotated[str, typer.Option("--retrieval-split", help="The qrels split of --retrieval.")] = "test",
    retrieval_pairs: Annotated[
        int, field_option(RetrievalAuditConfig, "max_pairs", "--retrieval-pairs", min=1)
    ] = field_default(RetrievalAuditConfig, "max_pairs"),
    retrieval_window: Annotated[
        int | None, field_option(RetrievalAuditConfig, "window", "--retrieval-window", min=8)
    ] = None,
    retrieval_search: Annotated[
        list[str] | None,
        typer.Option(
            "--retrieval-search",
            help="Also audit these searches on the same pairs: lexical (BM25 over each text), hybrid (dense and BM25 "
            "by convex fusion at the lexical weight, 0.1: the index's default before its z-score fusion of both BM25 "
            "granularities); comma-separated or repeated. The dense search (the model) is always audited.",
        ),
    ] = None,
    tempscale_t: Annotated[
        float | None,
        typer.Option("--tempscale", help="Audit the model under TempScale at this attention temperature t."),
    ] = None,
) -> None:
    """Audit a model with the elongation attack: similarity before/after copying texts m times (METHODS §1).

    With --docs (and --all or single switches) also runs the document diagnostics of METHODS §1 over a
    collection. Writes OUT/audit.json (every figure, settings, model/data fingerprints, versions), PNG
    plots and a self-contained OUT/report.html as one set, and prints a summary table.
    """
    from lengthwise.cli.options import check_device

    flags = dict(locals())
    flags["switches"] = {
        Diagnostic.PROBE: probe,
        Diagnostic.INTRA: intra,
        Diagnostic.ISOTROPY: isotropy,
        Diagnostic.COLLAPSE: collapse,
        Diagnostic.WORDS_CURVE: words_curve,
        Diagnostic.ATTENTION: attention or attention_all_layers,
    }
    try:
        job = _job(flags)
        check_device(device)
    except LengthwiseError as error:  # SettingError, DataFormatError
        fail(setting_message(error))
    _run(job, model=model, device=device, trust_remote_code=trust_remote_code, max_length=flags["max_length"],
         tempscale_t=tempscale_t, precision=precision)  # fmt: skip


def _run(job: AuditJob, *, model: str, device: str | None, trust_remote_code: bool, max_length: int | None,
         tempscale_t: float | None = None, precision: str = "fp32") -> None:  # fmt: skip
    """Make the one library call (`lengthwise.audit_model`) under a progress bar, then print the summary."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from transformers.utils import logging as hf_logging

    from lengthwise.pipelines import audit_model

    hf_logging.disable_progress_bar()  # our own progress bar covers the work; weight loading is instant
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task(f"loading {escape(model)}", total=None)

            def on_progress(stage: str, done: int, total: int) -> None:
                progress.update(task, description=escape(stage), completed=done, total=total)

            payload = audit_model(job, model, device=device, max_length=max_length, trust_remote_code=trust_remote_code,
                                  tempscale=tempscale_t, precision=precision, on_progress=on_progress)  # fmt: skip
    except LengthwiseError as error:  # NothingElongatedError, SettingError, DataFormatError, ModelLoadError
        fail(setting_message(error))
    console.print(_summary_table(payload))
    if "diagnostics" in payload:
        console.print(_diagnostics_table(payload["diagnostics"]))
    if "retrieval_bias" in payload:
        sections: list[tuple[str, Mapping[str, Any]]] = [("", payload["retrieval_bias"])]
        sections += [(f" ({name})", part) for name, part in payload["retrieval_bias"].get("by_search", {}).items()]
        for name, section in sections:
            for verdict in section["verdicts"]:
                mark = "retrieval bias" if verdict["significant"] else "retrieval"
                console.print(f"{mark}{name}: {verdict['text']}", markup=False, highlight=False)
    for warning in payload.get("warnings") or []:
        say(f"warning: {warning}", style="yellow")
    say(f"wrote {job.out / 'audit.json'} and {job.out / 'report.html'}")
