"""Similarity-histogram plotting shared by the audit report and the comparison (a leaf): colours, bin edges,
densities, re-binning and the zoom to where the mass is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from lengthwise.core._plotting import finish_axes

__all__ = [
    "ELONGATED_COLOR",
    "ORIGINAL_COLOR",
    "SHUFFLED_COLOR",
    "histogram_density",
    "histogram_edges",
    "mass_limits",
    "overlay",
    "rebin_counts",
]

ORIGINAL_COLOR, ELONGATED_COLOR, SHUFFLED_COLOR = "#3b6ea8", "#c8413b", "#2a9161"


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


def overlay(ax: Axes, edges: np.ndarray, series: Sequence[tuple[str, Sequence[int], float, str]]) -> None:
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
