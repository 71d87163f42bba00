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
    the edge: the earlier window), found for every document at once: ``torch.topk`` of one more than `count` over a
    padded (docs, widest) grid, and where that one ties the edge, the earliest of the edge's windows (`values`:
    finite)."""
    import torch

    firsts, sizes = offsets[docs], offsets[docs + 1] - offsets[docs]
    if not len(docs) or not sizes.any():
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    width = int(sizes.max())
    kind = values.dtype if np.issubdtype(values.dtype, np.floating) else np.float64
    found = values[window_rows(offsets, docs)]
    below = float(found.min()) - 1.0 - np.arange(width)  # pads under every value, distinct: never an edge's tie
    grid = np.broadcast_to(below.astype(kind), (len(docs), width)).copy()
    grid[np.arange(width) < sizes[:, None]] = found
    keep = min(count, width)
    best, found_at = torch.topk(torch.from_numpy(grid), min(keep + 1, width), dim=1, sorted=False)
    best, order = torch.sort(best, dim=1, descending=True)  # the one beyond `keep` says whether the edge has more
    columns = torch.gather(found_at, 1, order).numpy()[:, :keep]
    edges = best[:, keep - 1].numpy()
    crowded = (best[:, keep].numpy() == edges) if keep < width else np.zeros(len(docs), dtype=bool)
    for row in np.flatnonzero(crowded).tolist():  # more windows at the edge value than room: the earliest of them
        above = np.flatnonzero(grid[row] > edges[row])
        tied = np.flatnonzero(grid[row] == edges[row])[: keep - len(above)]
        columns[row] = np.concatenate([above, tied])
    columns = np.sort(columns, axis=1)
    taken = columns < sizes[:, None]  # a document of fewer windows than `keep`: its pads dropped
    places = np.broadcast_to(np.arange(len(docs))[:, None], columns.shape)[taken]
    return firsts[places] + columns[taken], places
