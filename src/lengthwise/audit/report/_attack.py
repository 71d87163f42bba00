"""The length attack's part of the report: paper-style similarity plots and HTML sections, from ``audit.json``.

Plots are drawn from the stored histogram counts with object-oriented matplotlib (no pyplot state). The page
is assembled by `lengthwise.audit.report.page`; this module imports only the leaves (`html`, `histograms`,
`lengthwise.core._plotting`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from lengthwise.audit.report._histograms import (
    ELONGATED_COLOR,
    ORIGINAL_COLOR,
    SHUFFLED_COLOR,
    histogram_density,
    histogram_edges,
    mass_limits,
    overlay,
    rebin_counts,
)
from lengthwise.audit.report.html import cells, escape_html, html_image, html_kv_table, html_table
from lengthwise.audit.schema import AttackSection, AuditPayload, ShiftSection
from lengthwise.core._plotting import finish_axes, new_figure, png_bytes

__all__ = [
    "PNG_NAMES",
    "figures",
    "html_sections",
    "plot_attack",
    "plot_first_k_curve",
    "plot_word_shuffle",
    "token_rows",
]

# names other modules imported from here before the leaves existed (lengthwise 0.1); import them from the leaves
_MOVED = (ELONGATED_COLOR, ORIGINAL_COLOR, SHUFFLED_COLOR, escape_html, finish_axes, html_table, png_bytes)

PNG_NAMES = dict(attack="attack_hist.png", first_k_curve="first_k_curve.png", word_shuffle="word_shuffle.png")


def _jsd_and_shift(stats: ShiftSection) -> str:
    """Plot-title numbers, with a typographic minus as matplotlib's tick labels have."""
    return f"JSD {stats['js_distance']:.3f}, mean shift {stats['mean_shift']:+.3f}".replace("-", "\u2212")


def _copies(payload: AuditPayload) -> str:
    """The requested number of copies m, and the m actually used when the length cap changed it."""
    wanted = str(payload["attack"].get("elongation", "?"))
    used_min, used_max = ((payload.get("tokens") or {}).get(key) for key in ("m_min", "m_max"))
    if used_min is None or used_max is None or str(used_min) == wanted == str(used_max):
        return f"m={wanted}"
    return f"m={wanted}, used {used_min}" + ("" if used_min == used_max else f"–{used_max}")


def plot_attack(payload: AuditPayload) -> Figure:
    """Cosine similarity of the original vs the elongated pairs, as two overlaid density histograms."""
    attack, histogram = payload["attack"], payload["attack"]["histogram"]
    figure = new_figure()
    ax = figure.add_subplot()
    original = ("original", histogram["before"], attack["mean_before"], ORIGINAL_COLOR)
    elongated = (f"elongated ({_copies(payload)})", histogram["after"], attack["mean_after"], ELONGATED_COLOR)
    overlay(ax, histogram_edges(payload), [original, elongated])
    ax.set_title(f"Length attack (n={attack['n']}): {_jsd_and_shift(attack)}", fontsize=11)
    return figure


def plot_first_k_curve(payload: AuditPayload) -> Figure | None:
    """Similarity distribution of the pairs cut to their first k tokens, per k; None without a curve."""
    rows = sorted(payload.get("first_k_curve") or [], key=lambda row: row["k"])
    if not rows:
        return None
    attack, edges = payload["attack"], histogram_edges(payload)
    full_counts = attack["histogram"]["before"]
    figure = new_figure()
    grid = figure.add_gridspec(1, 2, width_ratios=(1.75, 1.0))
    ax_hist, ax_mean = figure.add_subplot(grid[0]), figure.add_subplot(grid[1])
    colors = colormaps["viridis"](np.linspace(0.0, 0.85, len(rows)))
    low, high = mass_limits(edges, [full_counts, *(row["histogram"] for row in rows)])
    group = max(1, round((high - low) / (edges[1] - edges[0]) / 32))  # ~32 visible bins: steps stay legible
    counts, coarse_edges = rebin_counts(full_counts, edges, group)
    ax_hist.stairs(histogram_density(counts, coarse_edges), coarse_edges, fill=True, color="0.85", label="full text")
    for row, color in zip(rows, colors, strict=True):
        counts, coarse_edges = rebin_counts(row["histogram"], edges, group)
        ax_hist.stairs(
            histogram_density(counts, coarse_edges), coarse_edges, color=color, lw=1.3, label=f"k={row['k']}"
        )
    ax_hist.set_xlim(low, high)
    ax_hist.legend(fontsize=8, frameon=False, loc="upper left", title="first k tokens", title_fontsize=8)
    finish_axes(ax_hist, "cosine similarity", "density")
    ks, means, stds = (np.array([row[key] for row in rows], dtype=np.float64) for key in ("k", "mean", "std"))
    ax_mean.plot(ks, means, color="0.35", linewidth=1.2, zorder=2)
    for k, mean, std, color in zip(ks, means, stds, colors, strict=True):
        ax_mean.errorbar(k, mean, yerr=std, fmt="o", color=color, ms=5.5, capsize=3, mec="white", mew=0.6)
    ax_mean.axhline(attack["mean_before"], color=ORIGINAL_COLOR, ls="--", lw=1.1, label="full text")
    ax_mean.axhline(attack["mean_after"], color=ELONGATED_COLOR, ls=":", lw=1.4, label="elongated")
    ax_mean.set_xscale("log", base=2)
    ax_mean.set_xticks(ks, [str(int(k)) for k in ks])
    ax_mean.minorticks_off()
    ax_mean.legend(fontsize=8, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2)
    finish_axes(ax_mean, "k (tokens kept, log scale)", "mean cosine ± std")
    figure.suptitle("Semantic-altered curve: similarity of the first k tokens", fontsize=11)
    return figure


def plot_word_shuffle(payload: AuditPayload) -> Figure | None:
    """Cosine similarity of the original vs the word-shuffled pairs; None when the probe was not run."""
    shuffle = payload.get("word_shuffle")
    if not shuffle or "histogram" not in shuffle:
        return None
    original = payload["attack"]["histogram"]["before"]
    figure = new_figure()
    ax = figure.add_subplot()
    shuffled = ("words shuffled (text 1)", shuffle["histogram"], shuffle["mean_after"], SHUFFLED_COLOR)
    overlay(ax, histogram_edges(payload), [("original", original, shuffle["mean_before"], ORIGINAL_COLOR), shuffled])
    ax.set_title(f"Word shuffle (n={shuffle['n']}): {_jsd_and_shift(shuffle)}", fontsize=11)
    return figure


def _shift_rows(stats: ShiftSection, after_name: str) -> list[tuple[str, str]]:
    """Key-value rows for one similarity shift (the attack, or the word shuffle)."""
    before, after, shift = cells(stats, "mean_before:.3f", "mean_after:.3f", "mean_shift:+.3f")
    return [
        ("pairs", str(stats["n"])),
        ("mean cosine", f"{before} → {after} ({after_name}), shift {shift}"),
        ("median cosine", " → ".join(cells(stats, "median_before:.3f", "median_after:.3f"))),
        ("median per-pair shift", f"{stats['median_shift']:+.3f}"),
        ("pairs whose similarity rose", f"{stats['frac_increased']:.1%}"),
        ("Jensen–Shannon distance", f"{stats['js_distance']:.3f}{_null_note(stats)}"),
    ]


def _null_note(stats: ShiftSection) -> str:
    """' (noise level …, p = …)' from the permutation null, when the audit computed one."""
    null = stats.get("js_null")
    if not null:
        return ""
    return f" (same-distribution level {null['mean']:.3f}, 95% {null['q95']:.3f}; p = {null['p_value']:.3f})"


def _verdict(attack: AttackSection) -> str:
    """One plain-language sentence on what elongation did."""
    before, after, jsd = cells(attack, "mean_before:.3f", "mean_after:.3f", "js_distance:.3f")
    rose = f"{attack['frac_increased']:.0%}"
    shift = f"mean cosine {before} → {after} (JSD {jsd}{_null_note(attack)})"
    return f"Elongation raised the similarity of {rose} of pairs; {shift}."


# fmt: off
_TOKEN_LABELS = {
    "max_length": "max sequence length (tokens)", "special_tokens": "special tokens per sequence",
    "content_mean": "content tokens per text, mean", "content_median": "content tokens per text, median",
    "content_max": "content tokens per text, max", "truncated_texts": "texts cut at max length",
    "elongated_mean": "elongated sequence length, mean", "m_mean": "copies m used, mean",
    "m_min": "copies m used, min", "m_max": "copies m used, max",
    "sequences_embedded": "distinct sequences embedded", "tokens_embedded": "tokens embedded",
    "texts_elongated": "texts elongated (m ≥ 2)",
}
# fmt: on


def _first_k_section(payload: AuditPayload, png: bytes | None) -> list[str]:
    curve = sorted(payload.get("first_k_curve") or [], key=lambda row: row["k"])
    if not curve:
        return ['<p class="note">Not in this audit.</p>']
    fields = ("mean:.3f", "median:.3f", "std:.3f", "js_distance_vs_full:.3f")
    rows = [[row["k"], *cells(row, *fields)] for row in curve]
    caption = "Each text cut to its first k tokens; grey is the full text."
    header = ["k", "mean", "median", "std", "JSD vs full text"]
    return [html_image(png, "similarity histograms per k", caption), html_table(header, rows)]


def _word_shuffle_section(payload: AuditPayload, png: bytes | None) -> list[str]:
    shuffle = payload.get("word_shuffle")
    if not shuffle:
        return ['<p class="note">Not run in this audit.</p>']
    before, after, jsd = cells(shuffle, "mean_before:.3f", "mean_after:.3f", "js_distance:.3f")
    caption = "Cosine similarity with the words of the first text shuffled; dashed lines are means."
    return [
        f"<p>Shuffling the words of the first text moved the mean cosine {before} → {after} (JSD {jsd}).</p>",
        html_kv_table(_shift_rows(shuffle, "shuffled")),
        html_image(png, "similarity histograms, original vs word-shuffled", caption),
    ]


def _by_kind_section(payload: AuditPayload) -> list[str]:
    by_kind = payload.get("attack_by_kind") or {}
    if not by_kind:
        return []
    header = ["kind", "pairs", "mean before", "mean after", "mean shift", "rose", "JSD"]
    fields = ("mean_before:.3f", "mean_after:.3f", "mean_shift:+.3f", "frac_increased:.0%", "js_distance:.3f")
    rows = [[kind, stats["n"], *cells(stats, *fields)] for kind, stats in sorted(by_kind.items())]
    return ["<h2>Length attack by kind</h2>", html_table(header, rows)]


def figures(payload: AuditPayload) -> dict[str, Figure | None]:
    """The attack's plots (keys of `PNG_NAMES`); None where the audit has no data for one."""
    return {"attack": plot_attack(payload), "first_k_curve": plot_first_k_curve(payload),
            "word_shuffle": plot_word_shuffle(payload)}  # fmt: skip


def _warnings(payload: AuditPayload) -> list[str]:
    return [f'<p class="warning">Warning: {escape_html(text)}.</p>' for text in payload.get("warnings") or []]


def html_sections(payload: AuditPayload, images: Mapping[str, bytes]) -> list[str]:
    """The verdict, any warnings, and the length attack, first-k curve, word shuffle and by-kind sections."""
    attack = payload["attack"]
    attack_caption = "Cosine similarity of each pair, original vs both texts elongated; dashed lines are means."
    return [
        f'<p class="verdict">{escape_html(_verdict(attack))}</p>',
        *_warnings(payload),
        "<h2>Length attack</h2>",
        html_kv_table([("elongation", _copies(payload)), *_shift_rows(attack, "elongated")]),
        html_image(images.get("attack"), "similarity histograms, original vs elongated", attack_caption),
        "<h2>First k tokens (semantic-altered curve)</h2>",
        *_first_k_section(payload, images.get("first_k_curve")),
        "<h2>Word shuffle</h2>",
        *_word_shuffle_section(payload, images.get("word_shuffle")),
        *_by_kind_section(payload),
    ]


def token_rows(payload: AuditPayload) -> list[tuple[str, Any]]:
    """The ``tokens`` section as labelled rows for the report's Tokens table."""
    tokens = payload.get("tokens") or {}
    return [(_TOKEN_LABELS.get(k, k), f"{v:.2f}" if isinstance(v, float) else v) for k, v in tokens.items()]
