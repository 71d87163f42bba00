"""Text and tables of the document diagnostics in the report: findings, explanations, the bin and truncation
tables (the ``diagnostics`` section of ``audit.json``). The plots are in `doc_plots`, re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lengthwise.audit.report import _doc_plots as doc_plots
from lengthwise.audit.report._doc_plots import (
    EXPLANATIONS,
    TITLES,
)
from lengthwise.audit.report.html import escape_html, html_image, html_kv_table, html_table

__all__ = ["PNG_NAMES", "figures", "html_sections", "summary_rows"]

# The section protocol `page.SECTIONS` reads (``PNG_NAMES``, ``figures``, ``html_sections``): the plots are drawn in
# `doc_plots`, shared with the comparison page.
PNG_NAMES = doc_plots.PNG_NAMES
figures = doc_plots.figures


def _trend(points: Sequence[tuple[float, float | None, int]], unit: str = "tokens", over: str = "bins") -> str:
    """'rises from A (≈x tokens) to B (≈y tokens), Spearman ρ = r over k bins' for (x, value, n) points.

    Uses the bins holding at least `MIN_BIN_DOCS` documents (all bins when fewer than two qualify).
    """
    from scipy.stats import spearmanr

    usable = [(x, y) for x, y, n in points if y is not None and n >= doc_plots.MIN_BIN_DOCS]
    if len(usable) < 2:
        usable = [(x, y) for x, y, _ in points if y is not None]
    if len(usable) < 2:
        return "has too few bins to show a trend"
    (x0, y0), (x1, y1) = usable[0], usable[-1]
    verb = "rises" if y1 > y0 else "falls" if y1 < y0 else "stays"
    rho = spearmanr([x for x, _ in usable], [y for _, y in usable]).statistic
    rank = f", Spearman ρ = {rho:+.2f} over {len(usable)} {over}" if len(usable) > 2 else ""
    return f"{verb} from {y0:.3f} (≈{x0:.0f} {unit}) to {y1:.3f} (≈{x1:.0f} {unit}){rank}"


def _probe_finding(probe: Mapping[str, Any]) -> str:
    """The probe in one sentence: ridge first (the headline), least squares, the share cut, and any warnings."""
    ols = f"{probe['r2x100_mean']:.1f} ± {probe['r2x100_std']:.1f}"
    if "ridge_r2x100_mean" not in probe:  # an audit from lengthwise 0.1 without ridge
        return f"R² × 100 = {ols} with least squares (as the paper), over {probe['n']} texts."
    ridge = f"{probe['ridge_r2x100_mean']:.1f} ± {probe['ridge_r2x100_std']:.1f}"
    text = f"R² × 100 = {ridge} with ridge; {ols} with least squares (as the paper), over {probe['n']} texts"
    if "truncated_share" in probe:
        text += f"; {probe['truncated_share']:.0%} of them cut at the window"
    warnings = "".join(f" Warning: {warning}." for warning in probe.get("warnings") or [])
    return f"{text}.{warnings}"


def _findings(section: Mapping[str, Any]) -> dict[str, list[str]]:
    """Table-ready rows and a one-sentence reading for each diagnostic present."""
    out: dict[str, list[str]] = {}
    if (probe := section.get("probe")) and "skipped" in probe:
        out["probe"] = [f"Not measured: {probe['skipped']}."]
    elif probe:
        out["probe"] = [_probe_finding(probe)]
    if intra := section.get("intra"):
        if intra.get("elongated"):
            before, after = intra["original_subset"]["adjusted"][-1], intra["elongated"]["adjusted"][-1]
            out["intra"] = [f"Last layer, adjusted: {before:.3f} original → {after:.3f} elongated "
                            f"({intra['elongated']['n']} documents)."]  # fmt: skip
        else:
            out["intra"] = [
                f"Last layer, adjusted: {intra['original']['adjusted'][-1]:.3f}; no document was elongated."
            ]
    if iso := section.get("isotropy"):
        elongation = iso.get("elongation") or {}
        if "elongated" in elongation:
            o, e = elongation["original"]["anisotropy"], elongation["elongated"]["anisotropy"]
            out["isotropy"] = [f"Mean pairwise cosine {o:.3f} original → {e:.3f} elongated on the same "
                               f"{elongation['n']} documents; alignment {elongation['alignment']:.3f}."]  # fmt: skip
        else:
            out["isotropy"] = [f"Mean pairwise cosine {iso['original']['anisotropy']:.3f}; no document was elongated."]
    if collapse := section.get("collapse"):
        bins = collapse["by_bin"]
        cos = _trend([(b["middle"], b["mean_cosine"], b["n"]) for b in bins])
        dist = _trend([(b["middle"], b["mean_distance_to_centroid"], b["n"]) for b in bins])
        out["collapse"] = [f"Mean pairwise cosine {cos}; distance to the centroid {dist}."]
    if words := section.get("words_curve"):
        mean = words["mean"]
        points = [(k, cos, doc_plots.MIN_BIN_DOCS) for k, cos in zip(mean["ks"], mean["cosine"], strict=True)]
        out["words_curve"] = [f"Mean cosine over the word pairs {_trend(points, 'copies', 'values of k')}."]
    if attention := section.get("attention"):
        points = [(b["middle"], b["sigma_mean"], b["n"]) for b in attention["by_bin"]]
        out["attention"] = [f"Last-layer σ_a {_trend(points)}."]
    return out


def _bin_table(section: Mapping[str, Any]) -> str:
    """Per length bin: documents, elongated, mean cosine, distance to centroid, σ_a (where measured)."""
    tokens = section.get("tokens") or {}
    collapse = {b["bin"]: b for b in (section.get("collapse") or {}).get("by_bin", [])}
    sigma = {b["bin"]: b for b in (section.get("attention") or {}).get("by_bin", [])}
    rows = []
    for b in tokens.get("bins", []):
        c, s = collapse.get(b["bin"], {}), sigma.get(b["bin"], {})
        cells = [c.get("mean_cosine"), c.get("mean_distance_to_centroid"), s.get("sigma_mean")]
        rows.append([b["label"], b["n"], b["elongated"], *("—" if v is None else f"{v:.3f}" for v in cells)])
    header = ["content tokens", "docs", "elongated", "mean cosine", "dist. to centroid", "σ_a (last layer)"]
    return html_table(header, rows) if rows else ""


def _truncation_table(section: Mapping[str, Any]) -> list[str]:
    """How much the window cuts, per length bin in multiples of the window (empty for audits without it)."""
    cut = section.get("truncation")
    if not cut:
        return []
    rows = [
        [
            row["bin"],
            row["count"],
            *(f"{row[k]:.0%}" if k in row else "—" for k in ("cut_share", "tokens_beyond_share")),
        ]
        for row in cut["by_bin"]
    ]
    summary = (
        f"The window reads {cut['window']} content tokens: {cut['cut_share']:.0%} of the documents are cut, and "
        f"{cut['tokens_beyond_share']:.0%} of all their tokens lie beyond the window and never reach the embedding."
    )
    header = ["content tokens (before the cut)", "docs", "cut", "tokens beyond the window"]
    return ["<h3>Truncation</h3>", f"<p>{escape_html(summary)}</p>", html_table(header, rows)]


def html_sections(payload: Mapping[str, Any], images: Mapping[str, bytes]) -> list[str]:
    """The report's document-diagnostics sections (empty when the audit has none)."""
    section = payload.get("diagnostics")
    if not section:
        return []
    data, settings, tokens = section.get("data") or {}, section.get("settings") or {}, section.get("tokens") or {}
    intro = f"{tokens.get('n_docs', 0)} documents from {data.get('source', '—')}; " if data else ""
    intro += f"length bins of {settings.get('bin_width')} content tokens at N = {settings.get('max_length')}"
    intro += f" ({settings.get('bins_over', '')})." if settings.get("bins_over") else "."
    parts = ["<h2>Document diagnostics</h2>", f"<p>{escape_html(intro)}</p>", _bin_table(section)]
    parts += _truncation_table(section)
    findings = _findings(section)
    for key, title in TITLES.items():
        if key not in findings:
            continue
        parts.append(f"<h3>{title}</h3><p>{EXPLANATIONS[key]}</p>")
        parts.append(f'<p class="verdict">{escape_html(" ".join(findings[key]))}</p>')
        parts.append(html_image(images.get(key), title, EXPLANATIONS[key].split(". ")[0] + "."))
    parts += ["<h3>Diagnostics settings and data</h3>", html_kv_table({**settings, "data": data})]
    return parts


def summary_rows(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(measure, value) rows for the CLI's summary table."""
    return [(TITLES[key], " ".join(text)) for key, text in _findings(section).items()]
