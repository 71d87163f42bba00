"""Exact dense search over an embedded corpus: top-k, and the full rank a score takes (METHODS §4, §6).

The retrieval evaluator and the retrieval length-bias audit both rank with these functions. Embeddings are
expected L2-normalised, so the dot product is the cosine. Work runs one corpus chunk at a time, so the (N, D)
corpus matrix is the only large object in memory; a perturbed document is ranked against the cached corpus
without re-embedding it (`score_ranks`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["exact_search", "relevant_ranks", "score_ranks"]


def exact_search(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    top_k: int,
    *,
    corpus_chunk: int = 16384,
    exclude: Sequence[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k by dot product of (Q, D) queries against an (N, D) corpus, one corpus chunk at a time.

    `exclude[i]` is a corpus index that query i must not retrieve (-1: none). Returns scores and corpus indices,
    both (Q, min(k, N)), best first. Peak extra memory is (Q, corpus_chunk + k) scores.
    """
    k = min(top_k, corpus.shape[0])
    best_scores = torch.full((queries.shape[0], 0), float("-inf"))
    best_index = torch.zeros((queries.shape[0], 0), dtype=torch.long)
    skip = torch.as_tensor(exclude if exclude is not None else [-1] * queries.shape[0], dtype=torch.long)
    for start in range(0, corpus.shape[0], corpus_chunk):
        scores = queries @ corpus[start : start + corpus_chunk].T  # (Q, C)
        local = skip - start
        hit = (local >= 0) & (local < scores.shape[1])
        scores[hit.nonzero().squeeze(1), local[hit]] = float("-inf")
        chunk_scores, chunk_index = torch.topk(scores, min(k, scores.shape[1]), dim=1)  # (Q, k')
        merged_scores = torch.cat([best_scores, chunk_scores], dim=1)
        merged_index = torch.cat([best_index, chunk_index + start], dim=1)
        best_scores, order = torch.topk(merged_scores, min(k, merged_scores.shape[1]), dim=1)
        best_index = torch.gather(merged_index, 1, order)
    return best_scores, best_index


def score_ranks(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    query_index: np.ndarray,
    scores: np.ndarray | torch.Tensor,
    *,
    skip: np.ndarray | None = None,
    exclude: Sequence[int] | None = None,
    corpus_chunk: int = 16384,
    pair_chunk: int = 1024,
) -> np.ndarray:
    """The rank (1 = best) that score ``scores[p]`` takes for query row ``query_index[p]`` among the corpus: (P,) int.

    Rank = 1 + the number of corpus documents scoring strictly higher, leaving out corpus row ``skip[p]`` (the
    document the score stands in for, e.g. the original of a perturbed copy; -1: none) and the query's
    self-hit ``exclude[query]`` (-1: none). Peak extra memory: (pair_chunk, corpus_chunk) scores.
    """
    query_index = np.asarray(query_index, dtype=np.int64)
    own_all = torch.as_tensor(np.asarray(scores, dtype=np.float32))
    skip_pairs = torch.as_tensor(skip if skip is not None else np.full(len(query_index), -1), dtype=torch.long)
    skip_all = torch.as_tensor(exclude if exclude is not None else [-1] * queries.shape[0], dtype=torch.long)
    ranks = []
    for first in range(0, len(query_index), pair_chunk):
        pairs_q = torch.as_tensor(query_index[first : first + pair_chunk], dtype=torch.long)
        own = own_all[first : first + pair_chunk]  # (P,)
        left_out = (skip_pairs[first : first + pair_chunk], skip_all[pairs_q])
        higher = torch.zeros(len(pairs_q), dtype=torch.long)
        rows = torch.arange(len(pairs_q))
        for start in range(0, corpus.shape[0], corpus_chunk):
            chunk = queries[pairs_q] @ corpus[start : start + corpus_chunk].T  # (P, C)
            for column in left_out:
                local = column - start
                inside = (local >= 0) & (local < chunk.shape[1])
                chunk[rows[inside], local[inside]] = float("-inf")
            higher += (chunk > own[:, None]).sum(dim=1)
        ranks.append(higher + 1)
    return torch.cat(ranks).numpy() if ranks else np.zeros(0, dtype=np.int64)


def relevant_ranks(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    query_index: np.ndarray,
    doc_index: np.ndarray,
    *,
    corpus_chunk: int = 16384,
    pair_chunk: int = 1024,
    exclude: Sequence[int] | None = None,
) -> np.ndarray:
    """Full rank (1 = best) of corpus row ``doc_index[p]`` for query row ``query_index[p]``: (P,) int.

    Rank = 1 + number of other documents scoring strictly higher (the excluded self-hit never counts), so a
    relevant document beyond the top-k still gets its exact rank. Peak extra memory: (pair_chunk, corpus_chunk).
    """
    pairs_q = torch.as_tensor(np.asarray(query_index, dtype=np.int64))
    pairs_d = torch.as_tensor(np.asarray(doc_index, dtype=np.int64))
    own = (queries[pairs_q] * corpus[pairs_d]).sum(dim=1)  # (P,)
    return score_ranks(
        queries,
        corpus,
        np.asarray(query_index),
        own,
        skip=np.asarray(doc_index),
        exclude=exclude,
        corpus_chunk=corpus_chunk,
        pair_chunk=pair_chunk,
    )
