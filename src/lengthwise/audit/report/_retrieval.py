"""Plots, HTML and markdown for the retrieval length-bias audit (``audit.json`` → ``retrieval_bias``).

One audit renders a natural-bias figure, a controlled-perturbation figure, the verdicts and the tables; the
comparison page overlays several audits (`compare_figure`) and adds headline rows (`COMPARE_ROWS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lengthwise.audit.report._histograms import ELONGATED_COLOR, ORIGINAL_COLOR, SHUFFLED_COLOR
from lengthwise.audit.report.html import escape_html, html_image, html_kv_table, html_table
from lengthwise.audit.retrieval.result import format_p, verdicts
from lengthwise.core._plotting import finish_axes, new_figure

__all__ = [
    "COMPARE_PNG",
    "COMPARE_ROWS",
    "PNG_NAMES",
    "compare_figure",
    "compare_section",
    "figures",
    "html_sections",
    "markdown_tables",
    "plot_controlled",
    "plot_natural",
]

PNG_NAMES = {"retrieval_natural": "retrieval_natural.png", "retrieval_controlled": "retrieval_controlled.png"}
COMPARE_PNG = {"retrieval": "cmp_retrieval.png"}
_R = "retrieval_bias"
# (measure, path to the value (or the "before" value), path to the "after" value or None, format): compare.py rows
COMPARE_ROWS: list[tuple[str, tuple[str | int, ...], tuple[str | int, ...] | None, str]] = [
    (
        "retrieval: ρ(relevant document length, rank)",
        (_R, "natural", "rank_vs_length", "correlation", "rho"),
        None,
        "+.3f",
    ),
    (
        "retrieval: top-k length percentile in the corpus",
        (_R, "natural", "top_k_lengths", "retrieved_percentile", "mean"),
        None,
        ".1%",
    ),
    ("retrieval: partial ρ(score, length), non-relevant", (_R, "natural", "score_length", "partial_rho"), None, "+.3f"),
    ("retrieval: mean Δrank, diluted to 2×", (_R, "controlled", "dilution", "2x", "rank", "mean_delta"), None, "+.1f"),
    (
        "retrieval: recall@k, before → diluted to 2×",
        (_R, "controlled", "dilution", "2x", "recall_before"),
        (_R, "controlled", "dilution", "2x", "recall_after"),
        ".1%",
    ),
    (
        "retrieval: mean Δrank, relevant repeated 2×",
        (_R, "controlled", "repetition", "relevant", "m=2", "rank", "mean_delta"),
        None,
        "+.1f",
    ),
    (
        "retrieval: mean Δrank, non-relevant repeated 2×",
        (_R, "controlled", "repetition", "non_relevant", "m=2", "rank", "mean_delta"),
        None,
        "+.1f",
    ),
    (
        "retrieval: recall@k of the best sentence, depth 0 % → 100 %",
        (_R, "controlled", "position", "sentence", "depths", "0%", "recall_after"),
        (_R, "controlled", "position", "sentence", "depths", "100%", "recall_after"),
        ".1%",
    ),
]


def _bin_centre(label: str, width: int) -> float:
    """Where a length bin sits on the axis: the middle of ``lo-hi``; half a width past N for ``>N (truncated)``."""
    if label.startswith(">"):
        return float(label[1:].split()[0]) + width / 2
    low, high = (float(part) for part in label.split("-"))
    return (low + high) / 2


def plot_natural(section: Mapping[str, Any]) -> Figure:
    """Left: each relevant document's rank against its length, with the median rank per length bin. Right: the
    length distribution of the corpus, of the relevant documents and of the retrieved top k."""
    natural, window, k = section["natural"], section["window"], section["top_k"]
    figure = new_figure((11.0, 4.0))
    ax_rank, ax_len = figure.subplots(1, 2)
    pairs = natural["rank_vs_length"]["pairs"]
    ax_rank.scatter(pairs["length"], pairs["rank"], s=9, alpha=0.45, color=ORIGINAL_COLOR, lw=0, label="(query, doc)")
    rows = [row for row in natural["rank_vs_length"]["by_bin"] if row["count"]]
    centres = [_bin_centre(str(row["bin"]), section["settings"]["bin_width"]) for row in rows]
    ax_rank.plot(centres, [row["median_rank"] for row in rows], "o-", color=ELONGATED_COLOR, label="median per bin")
    ax_rank.axvline(window, color="0.4", ls=":", lw=1.1, label=f"window ({window} tokens)")
    ax_rank.set_yscale("log")
    ax_rank.invert_yaxis()
    corr = natural["rank_vs_length"]["correlation"]
    ax_rank.set_title(f"Rank of relevant documents: ρ = {corr['rho']:+.2f} ({format_p(corr['p_value'])})", fontsize=10)
    ax_rank.legend(fontsize=8, frameon=False)
    finish_axes(ax_rank, "relevant document length (tokens)", "rank (log scale, 1 at top)")
    histogram = natural["top_k_lengths"]["histogram"]
    edges = np.asarray(histogram["edges"])
    for name, label, color in (
        ("corpus", "corpus", "0.55"),
        ("relevant", "relevant", ORIGINAL_COLOR),
        ("retrieved", f"retrieved top {k}", ELONGATED_COLOR),
    ):
        counts = np.asarray(histogram[name], dtype=np.float64)
        density = counts / (counts.sum() * np.diff(edges)) if counts.sum() else counts
        ax_len.stairs(
            density,
            edges,
            color=color,
            lw=1.6,
            fill=name == "corpus",
            alpha=0.35 if name == "corpus" else 1,
            label=label,
        )
    ax_len.axvline(window, color="0.4", ls=":", lw=1.1)
    pct = natural["top_k_lengths"]["retrieved_percentile"]
    ax_len.set_title(f"Top-{k} lengths: {pct['mean']:.0%} corpus percentile on average", fontsize=10)
    ax_len.legend(fontsize=8, frameon=False)
    finish_axes(ax_len, f"document length (tokens; last bin ≥ {edges[-2]:.0f})", "density")
    return figure


def _errorbars(ax: Axes, xs: Sequence[float], settings: Sequence[Mapping[str, Any]], color: Any, label: str) -> None:
    means = np.asarray([s["rank"]["mean_delta"] for s in settings])
    lows = means - np.asarray([s["rank"]["ci95"][0] for s in settings])
    highs = np.asarray([s["rank"]["ci95"][1] for s in settings]) - means
    ax.errorbar(xs, means, yerr=[lows, highs], fmt="o-", color=color, capsize=3, ms=5, label=label)


def plot_controlled(section: Mapping[str, Any]) -> Figure:
    """Mean Δrank (95 % CI) under dilution and repetition, and recall@k by depth in the position probe."""
    controlled, k = section["controlled"], section["top_k"]
    figure = new_figure((12.0, 3.9))
    ax_dil, ax_rep, ax_pos = figure.subplots(1, 3)
    dilution = list(controlled["dilution"].values())
    _errorbars(ax_dil, [float(s["label"].rstrip("x")) for s in dilution], dilution, ELONGATED_COLOR, "relevant")
    ax_dil.set_xscale("log", base=2)
    ax_dil.set_xticks([float(s["label"].rstrip("x")) for s in dilution], [s["label"] for s in dilution])
    ax_dil.minorticks_off()
    ax_dil.set_title("Dilution with unrelated text", fontsize=10)
    finish_axes(ax_dil, "filler added (× document length)", "mean Δrank (> 0: moved down)")
    for target, color in (("relevant", ELONGATED_COLOR), ("non_relevant", SHUFFLED_COLOR)):
        settings = list(controlled["repetition"].get(target, {}).values())
        if settings:
            xs = [int(s["label"].removeprefix("m=")) for s in settings]
            _errorbars(ax_rep, xs, settings, color, target.replace("_", "-"))
            ax_rep.set_xticks(xs, [str(x) for x in xs])
    ax_rep.set_title("Repetition f(doc, m)", fontsize=10)
    ax_rep.legend(fontsize=8, frameon=False)
    finish_axes(ax_rep, "copies m", "mean Δrank (> 0: moved down)")
    for ax in (ax_dil, ax_rep):
        ax.axhline(0, color="0.3", lw=0.8)
    for unit, color in (("document", ORIGINAL_COLOR), ("sentence", ELONGATED_COLOR)):
        result = controlled["position"].get(unit)
        if not result:
            continue
        depths = list(result["depths"].values())
        depth_xs = [float(s["label"].rstrip("%")) for s in depths]
        ax_pos.plot(depth_xs, [100 * s["recall_after"] for s in depths], "o-", color=color, label=f"{unit} in filler")
        ax_pos.axhline(100 * result["alone_recall"], color=color, ls="--", lw=1.0, label=f"{unit} alone")
        ax_pos.set_xticks(depth_xs, [s["label"] for s in depths])
    total = section["settings"]["position_length"]
    ax_pos.set_title(f"Position in {total} tokens", fontsize=10)
    ax_pos.legend(fontsize=8, frameon=False)
    finish_axes(ax_pos, "depth of the unit in the filler", f"recall@{k} (%)")
    figure.suptitle(f"Controlled perturbations, {controlled['n_pairs']} (query, relevant document) pairs", fontsize=11)
    return figure


def figures(payload: Mapping[str, Any]) -> dict[str, Figure | None]:
    """The retrieval plots of one audit, keyed as `PNG_NAMES` (empty when the audit has no retrieval section)."""
    section = payload.get(_R)
    if not section:
        return {}
    return {"retrieval_natural": plot_natural(section), "retrieval_controlled": plot_controlled(section)}


def _setting_rows(settings: Mapping[str, Mapping[str, Any]], name: str) -> list[list[str]]:
    rows = []
    for label, s in settings.items():
        rank, score = s["rank"], s["score"]
        rows.append(
            [
                f"{name} {label}",
                str(s["n"]),
                str(s["n_cut"]),
                f"{s['tokens_before_mean']:.0f} → {s['tokens_mean']:.0f}",
                f"{rank['mean_delta']:+.1f} [{rank['ci95'][0]:+.1f}, {rank['ci95'][1]:+.1f}]",
                f"{rank['median_delta']:+g}",
                format_p(rank["p_value"]),
                f"{score['mean_delta']:+.4f}",
                format_p(score["p_value"]),
                f"{100 * s['recall_before']:.1f} → {100 * s['recall_after']:.1f}",
            ]
        )
    return rows


def _tables(section: Mapping[str, Any]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """The report's tables as (header, rows) of plain strings, shared by the HTML and the markdown."""
    natural, controlled, k = section["natural"], section["controlled"], section["top_k"]
    by_bin = [
        [row["bin"], row["count"], row.get("corpus_count", "—")]
        + (
            [f"{row['mean_rank']:.1f}", f"{row['median_rank']:g}", f"{100 * row['recall']:.1f}", f"{row['mrr']:.3f}"]
            if row["count"]
            else ["—"] * 4
        )
        for row in natural["rank_vs_length"]["by_bin"]
    ]
    lengths = natural["top_k_lengths"]
    length_rows = [
        [name, *(f"{lengths[name][key]:.0f}" for key in ("mean", "q25", "median", "q75"))]
        for name in ("corpus", "relevant", "retrieved")
    ]
    settings = _setting_rows(controlled["dilution"], "dilution")
    for target, table in controlled["repetition"].items():
        settings += _setting_rows(table, f"repetition ({target.replace('_', '-')})")
    for unit, result in controlled["position"].items():
        settings += _setting_rows(result["depths"], f"{unit} at depth")
    header = [
        "setting",
        "pairs",
        "cut to fit",
        "tokens",
        "mean Δrank [95 % CI]",
        "median Δrank",
        "p (rank)",
        "mean Δscore",
        "p (score)",
        f"recall@{k} % before → after",
    ]
    return {
        "by_bin": (
            ["length bin", "relevant pairs", "corpus docs", "mean rank", "median rank", f"recall@{k} %", "MRR"],
            by_bin,
        ),
        "lengths": (["documents", "mean tokens", "25 %", "median", "75 %"], length_rows),
        "controlled": (header, settings),
    }


def _first(settings: Mapping[str, Mapping[str, Any]], preferred: str) -> tuple[str, Mapping[str, Any]] | None:
    if preferred in settings:
        return preferred, settings[preferred]
    return next(iter(settings.items()), None)


def _shift_cell(found: tuple[str, Mapping[str, Any]] | None) -> str:
    if found is None:
        return "—"
    label, s = found
    rank = s["rank"]
    return (
        f"{label}: {rank['mean_delta']:+.1f} ({format_p(rank['p_value'])}); "
        f"{100 * s['recall_before']:.0f} → {100 * s['recall_after']:.0f} %"
    )


def search_table(section: Mapping[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """One row per audited search (dense, then ``by_search``): the headline of each bias; None with one search."""
    if not section.get("by_search"):
        return None
    k = section["top_k"]
    header = [
        "search",
        "ρ(length, rank)",
        f"top-{k} length percentile",
        "partial ρ(score, length)",
        f"dilution: mean Δrank; recall@{k}",
        "repetition (relevant)",
        "repetition (non-relevant)",
        "position (document): Friedman",
    ]
    rows = []
    for name, part in [("dense", section), *section["by_search"].items()]:
        natural, controlled = part["natural"], part["controlled"]
        corr = natural["rank_vs_length"]["correlation"]
        percentile = natural["top_k_lengths"]["retrieved_percentile"]
        partial = natural["score_length"]
        position = controlled["position"].get("document")
        rows.append(
            [
                name,
                f"{corr['rho']:+.3f} ({format_p(corr['p_value'])})",
                f"{percentile['mean']:.1%} [{percentile['ci95'][0]:.1%}, {percentile['ci95'][1]:.1%}]",
                f"{partial['partial_rho']:+.3f} (Wilcoxon {format_p(partial['wilcoxon_p'])})",
                _shift_cell(_first(controlled["dilution"], "2x")),
                _shift_cell(_first(controlled["repetition"]["relevant"], "m=2")),
                _shift_cell(_first(controlled["repetition"]["non_relevant"], "m=2")),
                "—" if position is None else format_p(position["friedman"]["p_value"]),
            ]
        )
    return header, rows


def _kv(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    natural, cost, controlled = section["natural"], section["cost"], section["controlled"]
    corr, lengths, partial = (natural[key] for key in ("rank_vs_length", "top_k_lengths", "score_length"))
    ret, rel = lengths["retrieved_percentile"], lengths["relevant_percentile"]
    return [
        (
            "Spearman ρ(length, rank), relevant pairs",
            f"{corr['correlation']['rho']:+.3f} "
            f"({format_p(corr['correlation']['p_value'])}, n = {corr['correlation']['n']})",
        ),
        (
            f"top-{section['top_k']} length percentile in the corpus",
            f"{ret['mean']:.1%} [{ret['ci95'][0]:.1%}, {ret['ci95'][1]:.1%}]; relevant documents {rel['mean']:.1%}",
        ),
        (
            "KS: top-k vs corpus / vs relevant",
            f"D = {lengths['ks_vs_corpus']['statistic']:.3f} "
            f"({format_p(lengths['ks_vs_corpus']['p_value'])}) / D = {lengths['ks_vs_relevant']['statistic']:.3f} "
            f"({format_p(lengths['ks_vs_relevant']['p_value'])})",
        ),
        (
            "partial Spearman ρ(score, length) given the query, non-relevant",
            f"{partial['partial_rho']:+.3f}; per query {partial['per_query_mean']:+.3f} "
            f"[{partial['per_query_ci95'][0]:+.3f}, {partial['per_query_ci95'][1]:+.3f}], "
            f"Wilcoxon {format_p(partial['wilcoxon_p'])}",
        ),
        ("window (content tokens)", str(section["window"])),
        ("pairs perturbed / available", f"{controlled['n_pairs']} / {controlled['pairs_available']}"),
        (
            "embedded: corpus, queries, sentences, perturbed",
            f"{cost['corpus_embedded']}, {cost['queries_embedded']}, "
            f"{cost['sentences_embedded']}, {cost['perturbed_embedded']}",
        ),
        ("perturbed text tokenizes back to the same ids", f"{cost['roundtrip_exact']:.1%}"),
    ]


def html_sections(payload: Mapping[str, Any], images: Mapping[str, bytes]) -> list[str]:
    """The report's retrieval section: verdicts, plots and tables ([] when the audit has none)."""
    section = payload.get(_R)
    if not section:
        return []
    lines = "".join(f"<li>{escape_html(v['text'])}</li>" for v in verdicts(section, section["settings"]["alpha"]))
    tables = _tables(section)
    natural_caption = "Relevant documents by length (left) and the length of what is retrieved (right)."
    controlled_caption = "Each (query, relevant document) pair compared with itself, unperturbed; bars: 95 % CI."
    by_search = []
    if (table := search_table(section)) is not None:
        by_search = [
            "<h3>By search: the same pairs ranked by the encoder, by BM25 and by both fused</h3>",
            html_table(*table),
        ]
        for name, part in section["by_search"].items():
            found = "".join(f"<li>{escape_html(v['text'])}</li>" for v in part["verdicts"])
            by_search.append(f'<p>{escape_html(name)}:</p><ul class="verdict">{found}</ul>')
    return [
        "<h2>Retrieval length bias</h2>",
        f'<ul class="verdict">{lines}</ul>',
        *by_search,
        html_kv_table(_kv(section)),
        html_image(images.get("retrieval_natural"), "rank against length; top-k lengths", natural_caption),
        html_table(*tables["by_bin"]),
        html_table(*tables["lengths"]),
        html_image(images.get("retrieval_controlled"), "dilution, repetition, position", controlled_caption),
        html_table(*tables["controlled"]),
    ]


def markdown_tables(section: Mapping[str, Any]) -> str:
    """The verdicts and tables as markdown (for docs/audit.md)."""
    parts = ["\n".join(f"- {v['text']}" for v in verdicts(section, section["settings"]["alpha"])), ""]
    parts += ["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in _kv(section)), ""]
    tables = list(_tables(section).values())
    if (table := search_table(section)) is not None:
        tables.insert(0, table)
    for header, rows in tables:
        parts.append("| " + " | ".join(header) + " |")
        parts.append("|" + "---|" * len(header))
        parts += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
        parts.append("")
    return "\n".join(parts)


def compare_figure(payloads: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> Figure | None:
    """Several audits' dilution Δrank and sentence-position recall overlaid; None when fewer than one has them."""
    series = [(label, p[_R]) for label, p in zip(labels, payloads, strict=True) if p.get(_R)]
    if not series:
        return None
    figure = new_figure((11.0, 3.9))
    ax_dil, ax_pos = figure.subplots(1, 2)
    for index, (label, section) in enumerate(series):
        color = colormaps["tab10"](index % 10)
        dilution = list(section["controlled"]["dilution"].values())
        _errorbars(ax_dil, [float(s["label"].rstrip("x")) for s in dilution], dilution, color, label)
        sentence = section["controlled"]["position"].get("sentence")
        if sentence:
            depths = list(sentence["depths"].values())
            xs = [float(s["label"].rstrip("%")) for s in depths]
            ax_pos.plot(xs, [100 * s["recall_after"] for s in depths], "o-", color=color, label=label)
    ax_dil.set_xscale("log", base=2)
    ax_dil.axhline(0, color="0.3", lw=0.8)
    ax_dil.legend(fontsize=8, frameon=False)
    finish_axes(ax_dil, "filler added (× document length)", "mean Δrank of relevant documents")
    ax_pos.legend(fontsize=8, frameon=False)
    finish_axes(ax_pos, "depth of the best-matching sentence (%)", f"recall@{series[0][1]['top_k']} (%)")
    figure.suptitle("Retrieval length bias: dilution (left) and position (right)", fontsize=11)
    return figure


def compare_section(images: Mapping[str, bytes]) -> list[str]:
    """The comparison page's retrieval block (nothing when no audit had a retrieval section)."""
    if "retrieval" not in images:
        return []
    caption = "Mean Δrank of relevant documents diluted with unrelated text, and recall by depth of the best sentence."
    return ["<h2>Retrieval length bias</h2>", html_image(images["retrieval"], "retrieval overlay", caption)]
