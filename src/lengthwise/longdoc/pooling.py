"""Pure maths of long documents: pooling window vectors into one, and choosing each token's macro-window.

No model here; `LongEncoder` feeds these functions the window vectors and spans it computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.longdoc.config import Strategy

__all__ = ["macro_assignment", "pool_windows"]


def pool_windows(vectors: np.ndarray, weights: np.ndarray, strategy: Strategy, *, normalize: bool) -> np.ndarray:
    """One document vector from its window vectors (k, D) and token counts (k,) → (D,) float32.

    truncate and late-chunking and chunk-mean (and multi-vector, as its single-vector summary) take the plain
    mean (METHODS §5); chunk-weighted weights each window by its token count (HiCL). `normalize` L2-normalises
    the result, as the model's own Normalize module would.
    """
    if strategy is Strategy.chunk_weighted:
        pooled = (vectors * weights[:, None]).sum(axis=0) / float(weights.sum())  # (D,)
    else:
        pooled = vectors.mean(axis=0)  # (D,)
    if normalize:
        norm = float(np.linalg.norm(pooled))
        pooled = pooled / norm if norm > 0 else pooled
    return pooled.astype(np.float32, copy=False)


def macro_assignment(n: int, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """For each of n tokens, the macro-window (index into `spans`) where it sits farthest from a cut: (n,) int.

    A window edge that is the document's own start or end is not a cut (no context is lost there), so it never
    counts as near. Late chunking takes each token's state from its assigned macro-window (METHODS §5).
    """
    positions = np.arange(n)  # (n,)
    best = np.full(n, -1, dtype=np.int64)  # each token's largest margin so far; -1 = in no window yet
    assigned = np.zeros(n, dtype=np.int64)
    for w, (start, end) in enumerate(spans):  # O(tokens covered) memory and time, not windows × tokens
        inside = positions[start:end]
        left = inside - start if start > 0 else np.full(len(inside), n)
        right = end - 1 - inside if end < n else np.full(len(inside), n)
        margin = np.minimum(left, right)
        better = margin > best[start:end]  # strictly: the first window wins a tie, as an argmax would
        best[start:end][better] = margin[better]
        assigned[start:end][better] = w
    if (best < 0).any():
        raise SettingError("spans", list(spans), f"the macro-windows do not cover every one of the {n} tokens")
    return assigned
