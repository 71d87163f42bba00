"""Window rows and their documents, as both backends number them: document d holds the rows
``offsets[d]:offsets[d + 1]``; and how many documents a dense query scores on every window."""

from __future__ import annotations

import numpy as np

from lengthwise.search import types

__all__ = ["documents_of", "rescored_count", "window_rows"]


def documents_of(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The document of each window row `rows`."""
    return np.searchsorted(offsets, rows, side="right") - 1


def window_rows(offsets: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The window rows of the documents numbered `docs`, in order: ``offsets[d]:offsets[d + 1]`` for each."""
    counts = offsets[docs + 1] - offsets[docs]
    return np.repeat(offsets[docs] - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


def rescored_count(k: int) -> int:
    """Documents a dense query's `k` best are chosen from, scored on all their windows: `types.RESCORED` · k, at
    least `types.RESCORED_AT_LEAST` (read when called: a test lowers them)."""
    return max(types.RESCORED * k, types.RESCORED_AT_LEAST)
