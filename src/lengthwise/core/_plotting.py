"""Plotting basics shared by every report: one figure size, one PNG resolution, one quiet axis style.

Object-oriented matplotlib on the Agg canvas (no pyplot state), so plots are safe in any thread and never
open a window.
"""

from __future__ import annotations

import io

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["DPI", "FIGSIZE", "finish_axes", "new_figure", "png_bytes"]

FIGSIZE = (7.0, 4.0)
DPI = 110


def new_figure(figsize: tuple[float, float] = FIGSIZE) -> Figure:
    """An empty figure with constrained layout on its own Agg canvas."""
    return FigureCanvasAgg(Figure(figsize=figsize, layout="constrained")).figure


def finish_axes(ax: Axes, xlabel: str, ylabel: str) -> None:
    """Axis labels and the shared quiet style: no top/right spines, faint horizontal grid."""
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(labelsize=9)
    ax.grid(axis="y", alpha=0.25, linewidth=0.6)
    ax.set_axisbelow(True)


def png_bytes(figure: Figure, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes on a white background."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, facecolor="white")
    return buffer.getvalue()
