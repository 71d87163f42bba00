"""The comparison view: several ``audit.json`` payloads (e.g. a model before and after TempScale or training)
side by side on one self-contained HTML page, with their plots overlaid.

    lengthwise report out/base out/tempscale --label base --label "t=0.8" --out out/compare
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure

from lengthwise.audit.report import _doc_plots as report_docs
from lengthwise.audit.report import _retrieval as report_retrieval
from lengthwise.audit.report._histograms import histogram_density, histogram_edges, mass_limits, rebin_counts
from lengthwise.audit.report.html import escape_html, html_image, html_page, html_table, lengthwise_version
from lengthwise.audit.schema import AuditPayload
from lengthwise.core._plotting import finish_axes, new_figure, png_bytes
from lengthwise.core.errors import SettingError
from lengthwise.core.output_set import write_output_set

__all__ = [
    "OUTPUT_NAMES",
    "comparison_files",
    "comparison_labels",
    "headline_rows",
    "plot_attack_overlay",
    "render_comparison",
    "write_comparison",
]

PNG_NAMES = {
    "attack": "cmp_attack.png",
    **{key: f"cmp_{key}.png" for key in report_docs.PNG_NAMES},
    **report_retrieval.COMPARE_PNG,
}
OUTPUT_NAMES = frozenset({"compare.html", *PNG_NAMES.values()})  # what a comparison may replace in its folder


def comparison_labels(payloads: Sequence[AuditPayload], labels: Sequence[str] | None = None) -> list[str]:
    """One distinct label per audit: `labels` when given (one per audit), else model names (``#2`` on repeats)."""
    if labels:
        if len(labels) != len(payloads):
            problem = f"{len(labels)} labels for {len(payloads)} audits; give one label per audit"
            raise SettingError("labels", list(labels), problem)
        return [str(label) for label in labels]
    names = [str((payload.get("model") or {}).get("name") or f"audit {i + 1}") for i, payload in enumerate(payloads)]
    return [
        name if names[:i].count(name) == 0 else f"{name} #{names[:i].count(name) + 1}" for i, name in enumerate(names)
    ]


def plot_attack_overlay(payloads: Sequence[AuditPayload], labels: Sequence[str]) -> Figure:
    """Length-attack similarity densities of every audit: original dotted, elongated solid, one colour each.

    The x axis is zoomed to where there is mass and bins are merged to about 32 visible steps.
    """
    figure = new_figure()
    ax = figure.add_subplot()
    histograms = [payload["attack"]["histogram"] for payload in payloads]
    edges = histogram_edges(payloads[0])
    low, high = mass_limits(edges, [counts for h in histograms for counts in (h["before"], h["after"])])
    group = max(1, round((high - low) / (edges[1] - edges[0]) / 32))
    for index, (payload, label, histogram) in enumerate(zip(payloads, labels, histograms, strict=True)):
        color, edges = colormaps["tab10"](index % 10), histogram_edges(payload)
        for counts_of, style, name in ((histogram["before"], ":", "original"), (histogram["after"], "-", "elongated")):
            counts, coarse = rebin_counts(counts_of, edges, group)
            ax.stairs(
                histogram_density(counts, coarse), coarse, color=color, ls=style, lw=1.5, label=f"{label}, {name}"
            )
    ax.set_xlim(low, high)
    ax.legend(fontsize=8, frameon=False)
    finish_axes(ax, "cosine similarity", "density")
    ax.set_title("Length attack: pair similarity, original (dotted) vs elongated (solid)", fontsize=11)
    return figure


def _get(section: Mapping[str, Any] | None, *path: str | int) -> Any:
    """``section[p0][p1]…`` or None where any step is missing. A ``by_bin`` list keeps only the bins holding at
    least `report_docs.MIN_BIN_DOCS` documents, so "shortest → longest bin" never rests on a handful of texts."""
    value: Any = section
    for key in path:
        if isinstance(value, Mapping):
            value = value.get(key)
            if key == "by_bin" and isinstance(value, list):
                value = [row for row in value if row.get("n", 0) >= report_docs.MIN_BIN_DOCS]
        elif isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            value = value[key]
        else:
            return None
    return value


def _cell(payload: AuditPayload, before: tuple[str | int, ...], after: tuple[str | int, ...] | None, spec: str) -> str:
    """One table cell: a value, or ``before → after``; "—" where a value is missing."""
    values = [_get(payload, *path) for path in (before, after) if path is not None]
    if any(value is None for value in values):
        return "—"
    return " → ".join(format(value, spec) for value in values)


D = "diagnostics"
# (measure, path to the value (or the "before" value), path to the "after" value or None, format)
_ROWS: list[tuple[str, tuple[str | int, ...], tuple[str | int, ...] | None, str]] = [
    ("attack: mean cosine, original → elongated", ("attack", "mean_before"), ("attack", "mean_after"), ".3f"),
    ("attack: pairs whose similarity rose", ("attack", "frac_increased"), None, ".1%"),
    ("attack: Jensen–Shannon distance", ("attack", "js_distance"), None, ".3f"),
    ("length probe: R² × 100, ridge (headline)", (D, "probe", "ridge_r2x100_mean"), None, ".1f"),
    ("length probe: R² × 100, least squares (as the paper)", (D, "probe", "r2x100_mean"), None, ".1f"),
    ("length probe: documents cut at the window", (D, "probe", "truncated_share"), None, ".0%"),
    (
        "intra-doc similarity − anisotropy, last layer: original → elongated",
        (D, "intra", "original_subset", "adjusted", -1),
        (D, "intra", "elongated", "adjusted", -1),
        ".3f",
    ),
    (
        "pooled anisotropy: original → elongated (same documents)",
        (D, "isotropy", "elongation", "original", "anisotropy"),
        (D, "isotropy", "elongation", "elongated", "anisotropy"),
        ".3f",
    ),
    (
        "uniformity: original → elongated (same documents)",
        (D, "isotropy", "elongation", "original", "uniformity"),
        (D, "isotropy", "elongation", "elongated", "uniformity"),
        ".3f",
    ),
    ("alignment of each text with its elongated self", (D, "isotropy", "elongation", "alignment"), None, ".3f"),
    (
        "length collapse: mean cosine, shortest → longest bin (≥ 10 docs)",
        (D, "collapse", "by_bin", 0, "mean_cosine"),
        (D, "collapse", "by_bin", -1, "mean_cosine"),
        ".3f",
    ),
    (
        "repeated words: cosine at k = 1 → largest k",
        (D, "words_curve", "mean", "cosine", 0),
        (D, "words_curve", "mean", "cosine", -1),
        ".3f",
    ),
    (
        "σ_a, last layer: shortest → longest bin (≥ 10 docs)",
        (D, "attention", "by_bin", 0, "sigma_mean"),
        (D, "attention", "by_bin", -1, "sigma_mean"),
        ".3f",
    ),
]


def headline_rows(payloads: Sequence[AuditPayload]) -> list[list[str]]:
    """The comparison table: one row per measure, one column per audit ("—" where it was not measured)."""
    rows = [
        [name, *(_cell(payload, before, after, spec) for payload in payloads)]
        for name, before, after, spec in [*_ROWS, *report_retrieval.COMPARE_ROWS]
    ]
    return [row for row in rows if any(value != "—" for value in row[1:])]


def _provenance(payloads: Sequence[AuditPayload], labels: Sequence[str]) -> tuple[str, str]:
    """A table of what each audit ran on, and a warning when the audits saw different data."""
    rows, data_hashes = [], set()
    for payload, label in zip(payloads, labels, strict=True):
        model, data = payload.get("model") or {}, payload.get("data") or {}
        docs = _get(payload, "diagnostics", "data") or {}
        data_hashes.add((data.get("sha256"), docs.get("sha256")))
        rows.append(
            [
                label,
                model.get("name", "—"),
                model.get("weights_sha256_16", "—"),
                model.get("max_seq_length", "—"),
                data.get("source", "—"),
                docs.get("source", "—"),
            ]
        )
    header = ["audit", "model", "weights hash", "N", "pairs", "documents"]
    warning = ""
    if len(data_hashes) > 1:
        warning = '<p class="verdict">These audits did not all run on the same pairs/documents; compare with care.</p>'
    return html_table(header, rows), warning


def render_comparison(payloads: Sequence[AuditPayload], labels: Sequence[str], images: Mapping[str, bytes]) -> str:
    """The self-contained comparison page; `images` maps keys of `PNG_NAMES` to PNG bytes."""
    title = "lengthwise comparison — " + " vs ".join(labels)
    provenance, warning = _provenance(payloads, labels)
    parts = [
        f"<h1>{escape_html(title)}</h1>",
        warning,
        "<h2>Headline numbers</h2>",
        html_table(["measure", *labels], headline_rows(payloads)),
        "<h2>Audits</h2>",
        provenance,
        "<h2>Length attack</h2>",
        html_image(images.get("attack"), "attack overlay", "Pair similarity per audit."),
    ]
    for key, title_text in report_docs.TITLES.items():
        if key in images:
            parts += [
                f"<h2>{title_text}</h2><p>{report_docs.EXPLANATIONS[key]}</p>",
                html_image(images[key], title_text, ""),
            ]
    parts += report_retrieval.compare_section(images)
    parts.append(f"<footer>Comparison rendered by lengthwise {escape_html(lengthwise_version())}.</footer>")
    return html_page(title, parts, viewport=False)


def comparison_files(
    payloads: Sequence[AuditPayload], labels: Sequence[str] | None = None
) -> dict[str, tuple[str, bytes]]:
    """The comparison's output set: {what: (file name, bytes)}, overlaid PNGs and ``compare.html``."""
    if len(payloads) < 2:
        raise SettingError("payloads", len(payloads), "a comparison needs at least two audits")
    names = comparison_labels(payloads, labels)
    series = [(name, payload.get("diagnostics") or {}) for name, payload in zip(names, payloads, strict=True)]
    figures: dict[str, Figure | None] = {"attack": plot_attack_overlay(payloads, names)}
    figures.update({key: plot(series) for key, plot in report_docs.PLOTTERS.items()})
    figures["retrieval"] = report_retrieval.compare_figure(payloads, names)
    images = {key: png_bytes(figure) for key, figure in figures.items() if figure is not None}
    files = {key: (PNG_NAMES[key], png) for key, png in images.items()}
    files["html"] = ("compare.html", render_comparison(payloads, names, images).encode("utf-8"))
    return files


def write_comparison(
    payloads: Sequence[AuditPayload], out_dir: str | Path, *, labels: Sequence[str] | None = None
) -> dict[str, Path]:
    """Write overlaid PNGs and ``compare.html`` into `out_dir` as one set (all or nothing); return {what: path}.
    Needs two or more audits."""
    files = comparison_files(payloads, labels)
    out = write_output_set(Path(out_dir), dict(files.values()), OUTPUT_NAMES, what="a comparison")
    return {key: out / name for key, (name, _) in files.items()}
