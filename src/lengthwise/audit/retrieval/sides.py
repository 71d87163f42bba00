"""The retrieval length-bias audit through a lexical or a hybrid search, beside the dense one (issue 35.5).

The dense audit ranks with the encoder's cosines, one corpus chunk at a time (`lengthwise.core.search`). A lexical
search (BM25 through a `LexicalScorer` the caller supplies) and the hybrid one (both fused by the convex rule of
`lengthwise.core.fusion`, as `lengthwise index` searches) are audited on the *same* pairs, the same perturbed
texts and the same negative samples, from full (Q, N) score matrices: the scores of every query against every
corpus document on each side, the query's self-hit set to −∞. A perturbed text is scored as if it stood in the
corpus in place of its original (the lexical side with the corpus's own statistics), and its rank is 1 + the number
of other corpus documents scoring strictly higher, as in the dense audit. In the hybrid search each side is
normalised by the query's best score over that corpus, the perturbed text included, so a copy that outscores
every document on one side also moves the others' fused scores, as it would in the index.

Memory: two (Q, N) float64 matrices (300 queries × 5,183 SciFact abstracts: 25 MB).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from lengthwise.core.fusion import convex_fuse

if TYPE_CHECKING:
    from lengthwise.audit.retrieval.config import LexicalScorer

__all__ = ["SearchSides", "blocks", "top_k_rows"]


@dataclass
class SearchSides:
    """Every query's score of every corpus document on the dense and the lexical side, the self-hit at −∞."""

    dense: np.ndarray  # (Q, N)
    lexical: np.ndarray  # (Q, N)
    scorer: LexicalScorer
    query_texts: Sequence[str]
    weight: float  # the lexical weight of the hybrid search

    @classmethod
    def build(
        cls,
        queries: torch.Tensor,
        corpus: torch.Tensor,
        scorer: LexicalScorer,
        query_texts: Sequence[str],
        exclude: Sequence[int],
        weight: float,
    ) -> SearchSides:
        dense = (queries @ corpus.T).double().numpy()
        lexical = np.zeros_like(dense)
        for row, text in enumerate(query_texts):
            lexical[row] = scorer.corpus_scores(text)
        rows = np.flatnonzero(np.asarray(exclude) >= 0)
        for matrix in (dense, lexical):
            matrix[rows, np.asarray(exclude)[rows]] = -np.inf
        return cls(dense, lexical, scorer, query_texts, weight)

    def matrix(self, search: str) -> np.ndarray:
        """The (Q, N) scores `search` ranks the corpus by (the hybrid: fused over the whole corpus per query)."""
        if search == "dense":
            return self.dense
        if search == "lexical":
            return self.lexical
        top_dense = np.max(self.dense, axis=1, keepdims=True)
        top_lexical = np.max(self.lexical, axis=1, keepdims=True)
        fused = convex_fuse(self.dense, self.lexical, self.weight, top_dense, top_lexical)
        return np.where(np.isfinite(self.dense), fused, -np.inf)

    def key_scores(
        self,
        search: str,
        query: np.ndarray,
        dense: np.ndarray,
        lexical: np.ndarray,
        skip: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Score and full rank of K texts, text k standing in for corpus row ``skip[k]`` for query ``query[k]``,
        given its ``dense[k]`` and ``lexical[k]`` scores: two (K,) arrays."""
        scores, ranks = np.zeros(len(query)), np.zeros(len(query), dtype=np.int64)
        for q in np.unique(query):
            at = np.flatnonzero(query == q)
            d_row, l_row = self.dense[q], self.lexical[q]
            if search == "lexical":
                own, others = lexical[at], np.broadcast_to(l_row, (len(at), len(l_row)))
            else:
                top_dense = np.maximum(_best_but(d_row, skip[at]), dense[at])[:, None]
                top_lexical = np.maximum(_best_but(l_row, skip[at]), lexical[at])[:, None]
                own = convex_fuse(dense[at, None], lexical[at, None], self.weight, top_dense, top_lexical)[:, 0]
                others = np.where(
                    np.isfinite(d_row), convex_fuse(d_row, l_row, self.weight, top_dense, top_lexical), -np.inf
                )
            higher = (others > own[:, None]).sum(axis=1)
            own_row = others[np.arange(len(at)), skip[at]] > own  # the stood-in-for row never counts
            scores[at], ranks[at] = own, higher - own_row + 1
        return scores, ranks

    def text_scores(self, query: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """The lexical score of ``texts[k]`` for query row ``query[k]`` (one scorer call per query)."""
        out = np.zeros(len(texts))
        for q in np.unique(query):
            at = np.flatnonzero(query == q)
            out[at] = self.scorer.text_scores(self.query_texts[int(q)], [texts[int(i)] for i in at])
        return out


def _best_but(row: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """The row's maximum leaving out column ``skip[k]``, for each k: (K,)."""
    first, second = np.argsort(-row, kind="stable")[:2] if len(row) > 1 else (0, 0)
    return np.where(skip == first, row[second] if len(row) > 1 else -np.inf, row[first])


def top_k_rows(matrix: np.ndarray, k: int) -> np.ndarray:
    """Each row's k best columns, best first, ties to the lower column: (Q, k)."""
    k = min(k, matrix.shape[1])
    return np.argsort(-matrix, axis=1, kind="stable")[:, :k]


def blocks(matrix: np.ndarray, size: int = 64) -> Iterator[np.ndarray]:
    """The matrix in row blocks, as the dense audit walks its queries."""
    for start in range(0, matrix.shape[0], size):
        yield matrix[start : start + size]
