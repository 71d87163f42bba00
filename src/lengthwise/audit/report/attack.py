"""The audit report: paper-style similarity plots and one self-contained HTML page, from ``audit.json``.

Plots are drawn from the stored histogram counts with object-oriented matplotlib (no pyplot state).
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from lengthwise.core.results import write_bytes_atomic

__all__ = ["load_payload", "plot_attack", "plot_first_k_curve", "plot_word_shuffle", "render_html", "write_report"]

FIGSIZE = (7.0, 4.0)
DPI = 110
PNG_NAMES = dict(attack="attack_hist.png", first_k_curve="first_k_curve.png", word_shuffle="word_shuffle.png")
ORIGINAL_COLOR, ELONGATED_COLOR, SHUFFLED_COLOR = "#3b6ea8", "#c8413b", "#2a9161"
_FIX = "pass an audit output directory or its audit.json, as written by `lengthwise audit`"


def load_payload(path: str | Path) -> dict[str, Any]:
    """Read an audit from its output directory or its ``audit.json``; ValueError if `path` is neither."""
    path = Path(path)
    file = path / "audit.json" if path.is_dir() else path
    if not file.is_file():
        raise ValueError(f"no audit at {file}: {_FIX}")
    try:
        payload = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{file} is not valid JSON ({error}): {_FIX}") from None
    _check_payload(payload, str(file))
    return payload


def _check_payload(payload: Any, where: str) -> None:
    attack = payload.get("attack") if isinstance(payload, Mapping) else None
    if not isinstance(attack, Mapping) or not isinstance(attack.get("histogram"), Mapping):
        raise ValueError(f"{where} is not an audit.json (no 'attack' histogram): {_FIX}")


def new_figure() -> Figure:
    return FigureCanvasAgg(Figure(figsize=FIGSIZE, layout="constrained")).figure


def finish_axes(ax: Axes, xlabel: str, ylabel: str) -> None:
    """Axis labels and the shared quiet style: no top/right spines, faint horizontal grid."""
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(labelsize=9)
    ax.grid(axis="y", alpha=0.25, linewidth=0.6)
    ax.set_axisbelow(True)


def histogram_edges(payload: Mapping[str, Any]) -> np.ndarray:
    """Bin edges shared by every stored histogram: equal bins over the attack histogram's ``range``."""
    histogram = payload["attack"]["histogram"]
    low, high = histogram.get("range", (-1.0, 1.0))
    return np.linspace(float(low), float(high), len(histogram["before"]) + 1)


def histogram_density(counts: Sequence[int] | np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts → probability density (integrates to 1); all zeros when the histogram is empty."""
    values = np.asarray(counts, dtype=np.float64)
    return values / (values.sum() * np.diff(edges)) if values.sum() > 0 else values


def rebin_counts(counts: Sequence[int], edges: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge every `group` adjacent bins (the last group may be narrower) → (counts, edges)."""
    starts = np.arange(0, len(counts), group)
    return np.add.reduceat(np.asarray(counts), starts), np.append(edges[starts], edges[-1])


def mass_limits(edges: np.ndarray, histograms: Sequence[Sequence[int]], pad: int = 2) -> tuple[float, float]:
    """The x range holding every non-empty bin, padded by `pad` bins, never outside the histogram range."""
    occupied = np.flatnonzero(np.sum([np.asarray(h) for h in histograms], axis=0))
    if occupied.size == 0:
        return float(edges[0]), float(edges[-1])
    first = max(int(occupied[0]) - pad, 0)
    last = min(int(occupied[-1]) + 1 + pad, len(edges) - 1)
    return float(edges[first]), float(edges[last])


def _overlay(ax: Axes, edges: np.ndarray, series: Sequence[tuple[str, Sequence[int], float, str]]) -> None:
    """Semi-transparent filled density histograms with a dashed line and a value label at each mean.

    The x axis is zoomed to where there is mass; the legend goes in the top corner away from the means.
    """
    densities = [histogram_density(counts, edges) for _, counts, _, _ in series]
    for (label, _, _, color), density in zip(series, densities, strict=True):
        ax.stairs(density, edges, fill=True, color=color, alpha=0.35, label=label)
        ax.stairs(density, edges, color=color, linewidth=1.1)
    ax.set_ylim(0.0, (max(float(d.max(initial=0.0)) for d in densities) or 1.0) * 1.22)
    means = sorted((float(mean), color) for _, _, mean, color in series)
    for rank, (mean, color) in enumerate(means):
        ax.axvline(mean, color=color, linestyle="--", linewidth=1.4)
        left = rank == 0 and len(means) > 1
        style: dict[str, Any] = {"ha": "right" if left else "left", "va": "top", "fontsize": 8.5, "color": color}
        ax.text(mean, 0.99, f" {mean:.3f} ", transform=ax.get_xaxis_transform(), **style)
    low, high = mass_limits(edges, [counts for _, counts, _, _ in series])
    ax.set_xlim(low, high)
    means_on_left = means[0][0] + means[-1][0] < low + high
    ax.legend(fontsize=9, frameon=False, loc="upper right" if means_on_left else "upper left")
    finish_axes(ax, "cosine similarity", "density")


def _jsd_and_shift(stats: Mapping[str, Any]) -> str:
    """Plot-title numbers, with a typographic minus as matplotlib's tick labels have."""
    return f"JSD {stats['js_distance']:.3f}, mean shift {stats['mean_shift']:+.3f}".replace("-", "\u2212")


def _copies(payload: Mapping[str, Any]) -> str:
    """The requested number of copies m, and the m actually used when the length cap changed it."""
    wanted = str(payload["attack"].get("elongation", "?"))
    used_min, used_max = ((payload.get("tokens") or {}).get(key) for key in ("m_min", "m_max"))
    if used_min is None or used_max is None or str(used_min) == wanted == str(used_max):
        return f"m={wanted}"
    return f"m={wanted}, used {used_min}" + ("" if used_min == used_max else f"–{used_max}")


def plot_attack(payload: Mapping[str, Any]) -> Figure:
    """Cosine similarity of the original vs the elongated pairs, as two overlaid density histograms."""
    attack, histogram = payload["attack"], payload["attack"]["histogram"]
    figure = new_figure()
    ax = figure.add_subplot()
    original = ("original", histogram["before"], attack["mean_before"], ORIGINAL_COLOR)
    elongated = (f"elongated ({_copies(payload)})", histogram["after"], attack["mean_after"], ELONGATED_COLOR)
    _overlay(ax, histogram_edges(payload), [original, elongated])
    ax.set_title(f"Length attack (n={attack['n']}): {_jsd_and_shift(attack)}", fontsize=11)
    return figure


def plot_first_k_curve(payload: Mapping[str, Any]) -> Figure | None:
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


def plot_word_shuffle(payload: Mapping[str, Any]) -> Figure | None:
    """Cosine similarity of the original vs the word-shuffled pairs; None when the probe was not run."""
    shuffle = payload.get("word_shuffle")
    if not shuffle or "histogram" not in shuffle:
        return None
    original = payload["attack"]["histogram"]["before"]
    figure = new_figure()
    ax = figure.add_subplot()
    shuffled = ("words shuffled (text 1)", shuffle["histogram"], shuffle["mean_after"], SHUFFLED_COLOR)
    _overlay(ax, histogram_edges(payload), [("original", original, shuffle["mean_before"], ORIGINAL_COLOR), shuffled])
    ax.set_title(f"Word shuffle (n={shuffle['n']}): {_jsd_and_shift(shuffle)}", fontsize=11)
    return figure


def png_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    return buffer.getvalue()


REPORT_CSS = """
body{font:15px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1d1d1f;max-width:960px;margin:2em auto}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}body{padding:0 1em}
.verdict{font-size:1.1em;background:#f4f6fa;border-left:4px solid #3b6ea8;padding:.6em 1em}.note{color:#666}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}th{background:#fafafa}td{word-break:break-word}
th,td{padding:.25em .8em;border-bottom:1px solid #e6e6e6;text-align:left;vertical-align:top}td.key{color:#555}
td.num{text-align:right;font-variant-numeric:tabular-nums}figure{margin:1em 0}img{max-width:100%;height:auto}
figcaption{color:#555;font-size:.9em}footer{margin-top:3em;color:#777;font-size:.85em;border-top:1px solid #ddd}
"""


def escape_html(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    """A plain-text rendering of one value for a table cell (not yet escaped)."""
    if value is None or value == {} or value == []:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return ", ".join(_fmt(item) for item in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{key}: {_fmt(item)}" for key, item in value.items())
    return str(value)


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested dicts → (dotted key, leaf value) pairs, in order."""
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def html_kv_table(rows: Sequence[tuple[str, Any]] | Mapping[str, Any]) -> str:
    items = list(_flatten(rows)) if isinstance(rows, Mapping) else list(rows)
    if not items:
        return '<p class="note">—</p>'
    body = "".join(f'<tr><td class="key">{escape_html(k)}</td><td>{escape_html(_fmt(v))}</td></tr>' for k, v in items)
    return f"<table>{body}</table>"


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A table whose first column is a label and the others right-aligned numbers."""
    head = "".join(f"<th>{escape_html(cell)}</th>" for cell in header)
    numbers = ["".join(f'<td class="num">{escape_html(cell)}</td>' for cell in row[1:]) for row in rows]
    body = "".join(f"<tr><td>{escape_html(row[0])}</td>{nums}</tr>" for row, nums in zip(rows, numbers, strict=True))
    return f"<table><tr>{head}</tr>{body}</table>"


def _cells(stats: Mapping[str, Any], *fields: str) -> list[str]:
    """``stats[key]`` formatted for each ``"key:spec"`` field, e.g. ``_cells(row, "mean:.3f")``."""
    return [format(stats[key], spec) for key, spec in (field.split(":", 1) for field in fields)]


def html_image(png: bytes | None, alt: str, caption: str) -> str:
    if png is None:
        return ""
    image = f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" alt="{escape_html(alt)}">'
    return f"<figure>{image}<figcaption>{escape_html(caption)}</figcaption></figure>"


def _shift_rows(stats: Mapping[str, Any], after_name: str) -> list[tuple[str, str]]:
    """Key-value rows for one similarity shift (the attack, or the word shuffle)."""
    before, after, shift = _cells(stats, "mean_before:.3f", "mean_after:.3f", "mean_shift:+.3f")
    return [
        ("pairs", str(stats["n"])),
        ("mean cosine", f"{before} → {after} ({after_name}), shift {shift}"),
        ("median cosine", " → ".join(_cells(stats, "median_before:.3f", "median_after:.3f"))),
        ("median per-pair shift", f"{stats['median_shift']:+.3f}"),
        ("pairs whose similarity rose", f"{stats['frac_increased']:.1%}"),
        ("Jensen–Shannon distance", f"{stats['js_distance']:.3f}{_null_note(stats)}"),
    ]


def _null_note(stats: Mapping[str, Any]) -> str:
    """' (noise level …, p = …)' from the permutation null, when the audit computed one."""
    null = stats.get("js_null")
    if not null:
        return ""
    return f" (same-distribution level {null['mean']:.3f}, 95% {null['q95']:.3f}; p = {null['p_value']:.3f})"


def _verdict(attack: Mapping[str, Any]) -> str:
    """One plain-language sentence on what elongation did."""
    before, after, jsd = _cells(attack, "mean_before:.3f", "mean_after:.3f", "js_distance:.3f")
    rose = f"{attack['frac_increased']:.0%}"
    shift = f"mean cosine {before} → {after} (JSD {jsd}{_null_note(attack)})"
    return f"Elongation raised the similarity of {rose} of pairs; {shift}."


def lengthwise_version() -> str:
    try:
        return metadata.version("lengthwise")
    except metadata.PackageNotFoundError:
        return "unknown"


# fmt: off
_TOKEN_LABELS = {
    "max_length": "max sequence length (tokens)", "special_tokens": "special tokens per sequence",
    "content_mean": "content tokens per text, mean", "content_median": "content tokens per text, median",
    "content_max": "content tokens per text, max", "truncated_texts": "texts cut at max length",
    "elongated_mean": "elongated sequence length, mean", "m_mean": "copies m used, mean",
    "m_min": "copies m used, min", "m_max": "copies m used, max",
    "sequences_embedded": "distinct sequences embedded", "tokens_embedded": "tokens embedded",
}
# fmt: on


def _first_k_section(payload: Mapping[str, Any], png: bytes | None) -> list[str]:
    curve = sorted(payload.get("first_k_curve") or [], key=lambda row: row["k"])
    if not curve:
        return ['<p class="note">Not in this audit.</p>']
    fields = ("mean:.3f", "median:.3f", "std:.3f", "js_distance_vs_full:.3f")
    rows = [[row["k"], *_cells(row, *fields)] for row in curve]
    caption = "Each text cut to its first k tokens; grey is the full text."
    header = ["k", "mean", "median", "std", "JSD vs full text"]
    return [html_image(png, "similarity histograms per k", caption), html_table(header, rows)]


def _word_shuffle_section(payload: Mapping[str, Any], png: bytes | None) -> list[str]:
    shuffle = payload.get("word_shuffle")
    if not shuffle:
        return ['<p class="note">Not run in this audit.</p>']
    before, after, jsd = _cells(shuffle, "mean_before:.3f", "mean_after:.3f", "js_distance:.3f")
    caption = "Cosine similarity with the words of the first text shuffled; dashed lines are means."
    return [
        f"<p>Shuffling the words of the first text moved the mean cosine {before} → {after} (JSD {jsd}).</p>",
        html_kv_table(_shift_rows(shuffle, "shuffled")),
        html_image(png, "similarity histograms, original vs word-shuffled", caption),
    ]


def _by_kind_section(payload: Mapping[str, Any]) -> list[str]:
    by_kind = payload.get("attack_by_kind") or {}
    if not by_kind:
        return []
    header = ["kind", "pairs", "mean before", "mean after", "mean shift", "rose", "JSD"]
    fields = ("mean_before:.3f", "mean_after:.3f", "mean_shift:+.3f", "frac_increased:.0%", "js_distance:.3f")
    rows = [[kind, stats["n"], *_cells(stats, *fields)] for kind, stats in sorted(by_kind.items())]
    return ["<h2>Length attack by kind</h2>", html_table(header, rows)]


def render_html(payload: Mapping[str, Any], images: Mapping[str, bytes]) -> str:
    """The self-contained report page; `images` maps keys of `PNG_NAMES` to PNG bytes (missing: no image)."""
    from lengthwise.audit.report import (
        documents as report_docs,  # document diagnostics' sections; it imports this module
    )
    from lengthwise.audit.report import retrieval as report_retrieval  # retrieval length bias; imports this module

    attack, model, meta = payload["attack"], payload.get("model") or {}, payload.get("meta") or {}
    name = escape_html(model.get("name") or "unknown model")
    tokens = payload.get("tokens") or {}
    token_rows = [(_TOKEN_LABELS.get(k, k), f"{v:.2f}" if isinstance(v, float) else v) for k, v in tokens.items()]
    attack_caption = "Cosine similarity of each pair, original vs both texts elongated; dashed lines are means."
    parts = [
        f"<h1>lengthwise audit — {name}</h1>",
        f'<p class="verdict">{escape_html(_verdict(attack))}</p>',
        "<h2>Length attack</h2>",
        html_kv_table([("elongation", _copies(payload)), *_shift_rows(attack, "elongated")]),
        html_image(images.get("attack"), "similarity histograms, original vs elongated", attack_caption),
        "<h2>First k tokens (semantic-altered curve)</h2>",
        *_first_k_section(payload, images.get("first_k_curve")),
        "<h2>Word shuffle</h2>",
        *_word_shuffle_section(payload, images.get("word_shuffle")),
        *_by_kind_section(payload),
        *report_docs.html_sections(payload, images),
        *report_retrieval.html_sections(payload, images),
        "<h2>Tokens</h2>",
        html_kv_table(token_rows),
    ]
    environment = meta.get("environment") or {}
    sections = {"Settings": payload.get("settings"), "Model": model, "Data": payload.get("data")}
    for title, section in {**sections, "Environment": environment}.items():
        parts.append(f"<h2>{title}</h2>{html_kv_table(section or {})}")
    made_with = (environment.get("packages") or {}).get("lengthwise") or "unknown"
    made = f"Audit made with lengthwise {made_with} on {meta.get('created', 'an unknown date')}"
    made += f" in {meta.get('seconds', '?')} s; report rendered by lengthwise {lengthwise_version()}."
    parts.append(f"<footer>{escape_html(made)}</footer>")
    head = '<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
    head += f"<title>lengthwise audit — {name}</title><style>{REPORT_CSS}</style>"
    body = "\n".join(part for part in parts if part)
    return f'<!DOCTYPE html>\n<html lang="en"><head>{head}</head>\n<body>\n{body}\n</body></html>\n'


def write_report(payload: Mapping[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write the PNG plots and ``report.html`` into `out_dir`, atomically; return {what: path written}.

    Keys are ``attack``, ``first_k_curve``, ``word_shuffle`` (only for the plots the audit has data for) and
    ``html``. A plot PNG left in `out_dir` by an earlier report is removed when this audit has no such plot.
    """
    _check_payload(payload, "payload")
    out = Path(out_dir)
    from lengthwise.audit.report import documents as report_docs  # document diagnostics' plots; it imports this module
    from lengthwise.audit.report import retrieval as report_retrieval  # retrieval length bias; it imports this module

    plotters = {"attack": plot_attack, "first_k_curve": plot_first_k_curve, "word_shuffle": plot_word_shuffle}
    figures = {key: plot(payload) for key, plot in plotters.items()} | report_docs.figures(payload)
    figures |= report_retrieval.figures(payload)
    images = {key: png_bytes(figure) for key, figure in figures.items() if figure is not None}
    names = PNG_NAMES | report_docs.PNG_NAMES | report_retrieval.PNG_NAMES
    written = {key: write_bytes_atomic(out / names[key], png) for key, png in images.items()}
    for stale in names.keys() - images.keys():
        (out / names[stale]).unlink(missing_ok=True)
    written["html"] = write_bytes_atomic(out / "report.html", render_html(payload, images).encode("utf-8"))
    return written
