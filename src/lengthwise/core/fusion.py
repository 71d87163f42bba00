"""Convex fusion of a dense and a lexical score (the hall's copy of the rule both rooms use).

The hybrid search (`lengthwise.longdoc.search.hybrid`) ranks with it, and the retrieval length-bias audit
(`lengthwise.audit.retrieval`) audits the same rule. Each side is normalised from its theoretical minimum (cosine
−1, BM25 0) to the query's best score on that side, then ``(1 - w) · dense' + w · lexical'`` (Bruch, Gai &
Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023, arXiv:2210.11934, "TMM").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads when fusing, so that config modules can import the default weight cheaply
    import numpy as np

__all__ = ["LEXICAL_GRANULARITY", "LEXICAL_WEIGHT", "TUNED_WEIGHTS", "convex_fuse"]

# The default lexical weight and what BM25 ranks, chosen on dev sets only by the rule docs/longdoc.md wrote before
# the results (benchmarks/bench_hybrid.py quality). First run (4 / 5 passkey and needle documents per length): BM25
# over whole documents at 0.1. Second run (20 per length, planned and committed before it ran): BM25 over the
# index's windows (a document scores its best window) at 0.1, dev mean 81.81 against 80.90 for whole documents.
LEXICAL_WEIGHT = 0.1
LEXICAL_GRANULARITY = "window"
TUNED_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the lexical weights `index tune` tries by default


def convex_fuse(
    dense: np.ndarray,
    lexical: np.ndarray,
    weight: float,
    top_dense: float | np.ndarray | None = None,
    top_lexical: float | np.ndarray | None = None,
) -> np.ndarray:
    """Fused scores of documents from their dense cosines and BM25 scores (same order, any shape).

    `top_dense` / `top_lexical` are the query's best score on each side (default: the maximum of the given
    scores), scalars or arrays that broadcast against the scores (one best per row); a side whose best is at its
    minimum (no positive BM25 score) contributes 0.
    """
    import numpy as np

    if top_dense is None:
        top_dense = float(dense.max()) if dense.size else 1.0
    if top_lexical is None:
        top_lexical = float(lexical.max()) if lexical.size else 0.0
    top_dense, top_lexical = np.asarray(top_dense, dtype=np.float64), np.asarray(top_lexical, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        dense_part = np.where(top_dense > -1.0, (dense + 1.0) / (top_dense + 1.0), 0.0)
        lexical_part = np.where(top_lexical > 0, lexical / np.where(top_lexical > 0, top_lexical, 1.0), 0.0)
    return (1.0 - weight) * dense_part + weight * lexical_part
