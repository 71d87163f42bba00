"""Window rows and their documents, as both backends number them: document d holds the rows
``offsets[d]:offsets[d + 1]``; and how many documents a dense query scores on every window."""

from __future__ import annotations

import numpy as np

from lengthwise.search import types

__all__ = ["best_rows", "documents_of", "rescored_count", "window_rows"]


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


def best_rows(values: np.ndarray, offsets: np.ndarray, docs: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, places): the window rows of each document `docs[p]` holding its `count` highest `values` (one per
    window row), ascending, with p beside each; the set ``argsort(-values[rows of d], stable)[:count]`` holds (ties at
    the edge: the earlier window), found for every document at once by one partition of a padded (docs, widest)
    grid instead of a sort per document (`values`: finite)."""
    firsts, sizes = offsets[docs], offsets[docs + 1] - offsets[docs]
    if not len(docs) or not sizes.any():
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    width = int(sizes.max())
    valid = np.arange(width) < sizes[:, None]
    kind = values.dtype if np.issubdtype(values.dtype, np.floating) else np.float64
    found = values[window_rows(offsets, docs)]
    below = float(found.min()) - 1.0 - np.arange(width)  # pads under every value, distinct: a quick partition
    grid = np.broadcast_to(below.astype(kind), (len(docs), width)).copy()
    grid[valid] = found
    keep = min(count, width)
    edge = np.partition(grid, width - keep, axis=1)[:, width - keep : width - keep + 1]  # each row's keep-th highest
    above = grid > edge  # a document of more than `count` windows: its edge is one of them, above every pad
    tied = grid == edge
    room = count - above.sum(axis=1, keepdims=True)  # how many of the edge's value each document still takes
    crowded = tied.sum(axis=1, keepdims=True) > room  # more windows at the edge value than room: the earlier ones
    if crowded.any():
        tied &= ~crowded | (np.cumsum(tied, axis=1) <= room)
    taken = above | tied
    few = sizes <= count  # a document of `count` windows or fewer: all of them (its edge may be a pad)
    taken[few] = valid[few]
    places, columns = np.nonzero(taken)
    return firsts[places] + columns, places
