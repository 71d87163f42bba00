"""Plots of the document diagnostics (the ``diagnostics`` section of ``audit.json``); imports only the leaves.

Every plot takes a list of ``(label, diagnostics)`` series, so one audit is the one-series case and the
comparison view (`lengthwise.audit.report.compare`) overlays several models with the same code. With one series,
original is blue and elongated red; with several, each model has a colour and elongated is dashed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lengthwise.audit.report._histograms import ELONGATED_COLOR, ORIGINAL_COLOR
from lengthwise.core._plotting import finish_axes, new_figure

__all__ = [
    "EXPLANATIONS",
    "MIN_BIN_DOCS",
    "PLOTTERS",
    "PNG_NAMES",
    "TITLES",
    "figures",
    "plot_attention",
    "plot_collapse",
    "plot_intra",
    "plot_isotropy",
    "plot_probe",
    "plot_words_curve",
]

Series = Sequence[tuple[str, Mapping[str, Any]]]
PNG_NAMES = dict(
    probe="diag_probe.png",
    intra="diag_intra.png",
    isotropy="diag_isotropy.png",
    collapse="diag_collapse.png",
    words_curve="diag_words_curve.png",
    attention="diag_attention.png",
)


def _color(index: int, count: int, elongated: bool = False) -> Any:
    if count == 1:
        return ELONGATED_COLOR if elongated else ORIGINAL_COLOR
    return colormaps["tab10"](index % 10)


def _line(ax: Axes, x: Sequence[float], y: Sequence[float | None], label: str, index: int, count: int,
          elongated: bool = False, err: Sequence[float] | None = None) -> None:  # fmt: skip
    """One curve; missing values (None) are skipped. Elongated curves are dashed with hollow markers."""
    points = [(a, b, e) for a, b, e in zip(x, y, err or [0.0] * len(x), strict=True) if b is not None]
    if not points:
        return
    xs, ys, es = (np.array(v, dtype=np.float64) for v in zip(*points, strict=True))
    color = _color(index, count, elongated)
    style: dict[str, Any] = {"color": color, "ls": "--" if elongated else "-", "lw": 1.5, "ms": 5, "label": label}
    style.update(marker="o", mfc="white" if elongated else color)
    if err is not None:
        ax.errorbar(xs, ys, yerr=es, capsize=3, **style)
    else:
        ax.plot(xs, ys, **style)


def _present(series: Series, key: str) -> list[tuple[int, str, Mapping[str, Any]]]:
    return [(i, label, section[key]) for i, (label, section) in enumerate(series) if section.get(key)]


def _name(label: str, count: int, condition: str) -> str:
    return condition if count == 1 else f"{label}, {condition}"


def _legend(ax: Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, frameon=False)


def plot_probe(series: Series) -> Figure | None:
    """Length-probe R² × 100 (mean ± std over folds) per model: ridge (filled, the headline) and least squares
    (hatched, as the paper)."""
    rows = [row for row in _present(series, "probe") if "r2x100_mean" in row[2]]
    if not rows:
        return None
    figure = new_figure()
    ax = figure.add_subplot()
    for x, (i, _, probe) in enumerate(rows):
        color = _color(i, 2 if len(rows) > 1 else 1)
        bars = [("ridge_r2x100", "ridge (headline)", None), ("r2x100", "least squares", "//")]
        for offset, (key, name, hatch) in zip((-0.18, 0.18), bars, strict=True):
            if f"{key}_mean" not in probe:
                continue
            mean, std = probe[f"{key}_mean"], probe[f"{key}_std"]
            style = {"color": "white" if hatch else color, "edgecolor": color, "hatch": hatch}
            ax.bar(x + offset, mean, yerr=std, width=0.34, capsize=3, label=name if x == 0 else None, **style)
            ax.annotate(f"{mean:.1f}", (x + offset, max(mean, 0.0) + std), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)  # fmt: skip
    ax.set_xticks(range(len(rows)), [label for _, label, _ in rows], fontsize=9)
    ax.set_xlim(-0.9, len(rows) - 0.1)
    low, high = ax.get_ylim()
    ax.set_ylim(min(low, 0.0), max(high, 0.0) * 1.2 + 1.0)
    ax.axhline(0.0, color="0.4", lw=0.8)
    finish_axes(ax, "", "R² × 100 (5-fold CV, mean ± std)")
    ax.legend(fontsize=8, frameon=False, loc="upper left", ncols=2)
    ax.set_title("Length probe: how linearly embeddings encode token length", fontsize=11)
    return figure


def plot_intra(series: Series) -> Figure | None:
    """Per layer: intra-document similarity minus token anisotropy (left), and the anisotropy (right)."""
    rows = _present(series, "intra")
    if not rows:
        return None
    figure = new_figure()
    ax_adj, ax_aniso = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    for i, label, intra in rows:
        layers = intra["layers"]
        base = intra.get("original_subset") or intra["original"]
        conditions = [("original", base, False)]
        if intra.get("elongated"):
            conditions.append(("elongated", intra["elongated"], True))
        for condition, stats, elongated in conditions:
            name = _name(label, len(rows), f"{condition} (n={stats['n']})")
            _line(ax_adj, layers, stats["adjusted"], name, i, len(rows), elongated)
            _line(ax_aniso, layers, stats["anisotropy"], name, i, len(rows), elongated)
    finish_axes(ax_adj, "layer (0 = embeddings)", "intra-doc similarity − anisotropy")
    finish_axes(ax_aniso, "layer (0 = embeddings)", "token anisotropy")
    _legend(ax_adj)
    figure.suptitle("Intra-document similarity per layer (elongated documents only)", fontsize=11)
    return figure


def plot_isotropy(series: Series) -> Figure | None:
    """Per length bin: anisotropy (mean pairwise cosine) and uniformity, original vs elongated."""
    rows = _present(series, "isotropy")
    if not rows:
        return None
    figure = new_figure()
    axes = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    for i, label, iso in rows:
        bins = iso["by_bin"]
        x = [b["middle"] for b in bins]
        for ax, key in zip(axes, ("anisotropy", "uniformity"), strict=True):
            _line(ax, x, [b["original"][key] for b in bins], _name(label, len(rows), "original"), i, len(rows))
            elong = [(b.get("elongation") or {}).get("elongated", {}).get(key) for b in bins]
            _line(ax, x, elong, _name(label, len(rows), "elongated"), i, len(rows), True)
    finish_axes(axes[0], "content tokens (bin middle)", "mean pairwise cosine")
    finish_axes(axes[1], "content tokens (bin middle)", "uniformity (lower = more uniform)")
    _legend(axes[0])
    figure.suptitle("Isotropy of pooled embeddings by length bin", fontsize=11)
    return figure


def plot_collapse(series: Series) -> Figure | None:
    """Per length bin: mean pairwise cosine within the bin and mean distance to the global centroid."""
    rows = _present(series, "collapse")
    if not rows:
        return None
    figure = new_figure()
    axes = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    for i, label, collapse in rows:
        bins = collapse["by_bin"]
        x = [b["middle"] for b in bins]
        _line(axes[0], x, [b["mean_cosine"] for b in bins], label, i, len(rows))
        _line(axes[1], x, [b["mean_distance_to_centroid"] for b in bins], label, i, len(rows))
        if len(rows) == 1:  # how many texts each point stands for
            for b in bins:
                if b["mean_cosine"] is not None:
                    axes[0].annotate(f"{b['n']}", (b["middle"], b["mean_cosine"]), xytext=(0, 6),
                                     textcoords="offset points", ha="center", fontsize=7, color="0.35")  # fmt: skip
    finish_axes(axes[0], "content tokens (bin middle)", "mean pairwise cosine in bin")
    finish_axes(axes[1], "content tokens (bin middle)", "mean distance to centroid")
    if len(rows) > 1:
        _legend(axes[0])
    figure.suptitle("Length collapse: do long texts crowd together?", fontsize=11)
    return figure


def plot_words_curve(series: Series) -> Figure | None:
    """Cosine of two unrelated words, each repeated k times, against k (log scale)."""
    rows = _present(series, "words_curve")
    if not rows:
        return None
    figure = new_figure()
    ax = figure.add_subplot()
    for i, label, curve in rows:
        if len(rows) == 1:
            pale = colormaps["Set2"](np.arange(len(curve["pairs"])) % 8)
            for pair, color in zip(curve["pairs"], pale, strict=True):
                ax.plot(pair["ks"], pair["cosine"], color=color, lw=1.2, label=" / ".join(pair["words"]))
        name = _name(label, len(rows), "mean over pairs")
        _line(ax, curve["mean"]["ks"], curve["mean"]["cosine"], name, i, len(rows))
    ax.set_xscale("log", base=2)
    ticks = rows[0][2]["mean"]["ks"]
    ax.set_xticks(ticks, [str(k) for k in ticks])
    ax.minorticks_off()
    finish_axes(ax, "k (copies of each word, log scale)", "cosine of the two repeated words")
    _legend(ax)
    ax.set_title("Two unrelated words repeated k times (length-collapse App. C.4)", fontsize=11)
    return figure


def plot_attention(series: Series) -> Figure | None:
    """σ_a of the last layer (mean ± std over documents) per length bin; per-layer curves when recorded."""
    rows = _present(series, "attention")
    if not rows:
        return None
    figure = new_figure()
    per_layer = len(rows) == 1 and "per_layer_mean" in rows[0][2]["by_bin"][0]
    ax = figure.add_subplot(1, 2, 1) if per_layer else figure.add_subplot()
    for i, label, attention in rows:
        bins = attention["by_bin"]
        x, y, err = ([b[key] for b in bins] for key in ("middle", "sigma_mean", "sigma_std"))
        _line(ax, x, y, _name(label, len(rows), "last layer"), i, len(rows), err=err)
    finish_axes(ax, "content tokens (bin middle)", "σ_a (mean ± std)")
    _legend(ax)
    if per_layer:
        ax_layers = figure.add_subplot(1, 2, 2)
        bins = rows[0][2]["by_bin"]
        colors = colormaps["viridis"](np.linspace(0.0, 0.9, len(bins)))
        for b, color in zip(bins, colors, strict=True):
            layers = range(1, len(b["per_layer_mean"]) + 1)
            ax_layers.plot(layers, b["per_layer_mean"], marker="o", ms=4, color=color, label=b["label"])
        ax_layers.legend(fontsize=7, frameon=False, title="tokens", title_fontsize=7)
        finish_axes(ax_layers, "layer", "σ_a (mean)")
    figure.suptitle("Attention low-pass filter rate σ_a by length (smaller = stronger smoothing)", fontsize=11)
    return figure


PLOTTERS = dict(
    probe=plot_probe,
    intra=plot_intra,
    isotropy=plot_isotropy,
    collapse=plot_collapse,
    words_curve=plot_words_curve,
    attention=plot_attention,
)


def figures(payload: Mapping[str, Any]) -> dict[str, Figure | None]:
    """Every diagnostics plot of one audit (keys of `PNG_NAMES`); empty when the audit has no diagnostics."""
    section = payload.get("diagnostics")
    if not section:
        return {}
    label = str((payload.get("model") or {}).get("name") or "model")
    return {key: plot([(label, section)]) for key, plot in PLOTTERS.items()}


MIN_BIN_DOCS = 10  # bins with fewer documents are plotted but left out of the trend sentences

TITLES = dict(
    probe="Length probe",
    intra="Intra-document similarity",
    isotropy="Isotropy, alignment and uniformity",
    collapse="Length collapse",
    words_curve="Repeated unrelated words",
    attention="Attention filter rate σ_a",
)

EXPLANATIONS = {
    "probe": "A linear regression from the pooled embedding to the token count the model read, 5-fold "
    "cross-validated (length-attack App. D); ridge is the headline, least squares (the paper's) overfits when a fold "
    "has fewer texts than the embedding has dimensions. High R² means length is written into the embedding, which "
    "an elongation attack can exploit. When most documents are cut at the window, the count is mostly the window "
    "itself and the probe says little.",
    "intra": "For each document, the mean cosine between its token vectors and its mean-pooled vector, minus the "
    "layer's anisotropy (mean cosine of token pairs from different documents), per layer (laser3 PoC 2). A rise "
    "after elongation means tokens collapse further onto the document's dominant direction.",
    "isotropy": "Anisotropy is the mean cosine of all pairs of pooled embeddings (0 = spread out); uniformity "
    "(Wang & Isola) is log E exp(−2‖x−y‖²), more negative = more uniform. Alignment is the mean squared distance "
    "between each text and its elongated copy (0 = elongation changes nothing).",
    "collapse": "Texts binned by token length; per bin, the mean cosine of all pairs inside the bin and the mean "
    "distance to the centroid of all embeddings. Length collapse shows as cosine rising and distance falling "
    "with length.",
    "words_curve": "Two texts that share no token — one word repeated k times, another word repeated k times. "
    "Their cosine should not grow with k; if it does, length alone pulls embeddings together.",
    "attention": "σ_a is the largest singular value of (I − 11ᵀ/n)A for an attention matrix A, averaged over "
    "heads (length-collapse Thm 2): the share of high-frequency signal one attention layer lets through. "
    "Smaller σ_a = stronger low-pass filtering; the paper predicts σ_a falls as texts get longer.",
}
