"""core.search: exact top-k, and the rank a given score takes against a cached corpus."""

from __future__ import annotations

import numpy as np
import torch

from lengthwise.core.search import exact_search, relevant_ranks, score_ranks


def _unit(rows: int, dim: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(rows, dim, generator=generator), dim=-1)


def test_score_ranks_match_a_full_sort_with_the_original_left_out() -> None:
    queries, corpus = _unit(5, 8, 0), _unit(41, 8, 1)
    query_index = np.array([0, 1, 2, 3, 4, 0])
    skip = np.array([3, 7, -1, 40, 0, 5])
    scores = np.array([0.9, 0.1, -0.2, 0.5, 0.0, 0.3], dtype=np.float32)
    ranks = score_ranks(queries, corpus, query_index, scores, skip=skip, corpus_chunk=6, pair_chunk=4)
    full = (queries @ corpus.T).numpy()
    for p, (q, left_out, score) in enumerate(zip(query_index, skip, scores, strict=True)):
        others = np.delete(full[q], left_out) if left_out >= 0 else full[q]
        assert ranks[p] == 1 + int((others > score).sum())


def test_score_ranks_leave_out_the_self_hit() -> None:
    queries, corpus = _unit(2, 8, 2), _unit(10, 8, 3)
    best = int(torch.argmax(queries[0] @ corpus.T))
    plain = score_ranks(queries, corpus, np.array([0]), np.array([-1.0]))
    dropped = score_ranks(queries, corpus, np.array([0]), np.array([-1.0]), exclude=[best, -1])
    assert plain.tolist() == [11] and dropped.tolist() == [10]


def test_relevant_ranks_are_score_ranks_of_the_documents_own_score() -> None:
    queries, corpus = _unit(4, 8, 4), _unit(30, 8, 5)
    query_index, doc_index = np.array([0, 1, 2, 3]), np.array([9, 0, 29, 9])
    own = (queries[torch.as_tensor(query_index)] * corpus[torch.as_tensor(doc_index)]).sum(dim=1).numpy()
    assert np.array_equal(
        relevant_ranks(queries, corpus, query_index, doc_index),
        score_ranks(queries, corpus, query_index, own, skip=doc_index),
    )
    top = exact_search(queries, corpus, 1)[1][:, 0].numpy()
    assert relevant_ranks(queries, corpus, np.arange(4), top).tolist() == [1, 1, 1, 1]
