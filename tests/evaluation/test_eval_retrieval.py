from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lengthwise.core.embed import TokenView
from lengthwise.core.search import exact_search, relevant_ranks
from lengthwise.evaluation.config import RetrievalConfig
from lengthwise.evaluation.data import RetrievalData, read_beir
from lengthwise.evaluation.retrieval import evaluate_retrieval, trec_scores

from .conftest import TableEncoder


def _random(q: int, n: int, d: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(q, d, generator=generator), torch.randn(n, d, generator=generator)


@pytest.mark.parametrize("chunk", [1, 7, 50, 1000])
def test_chunked_search_equals_brute_force(chunk: int) -> None:
    queries, corpus = _random(9, 200)
    scores, index = exact_search(queries, corpus, 20, corpus_chunk=chunk)
    brute_scores, brute_index = torch.topk(queries @ corpus.T, 20, dim=1)
    assert torch.equal(index, brute_index)
    assert torch.allclose(scores, brute_scores)


def test_search_drops_the_excluded_self_hit_and_still_returns_k() -> None:
    queries, corpus = _random(4, 30)
    corpus[5] = queries[0] * 10  # query 0's best match by far is corpus row 5
    _, index = exact_search(queries, corpus, 10, corpus_chunk=8, exclude=[5, -1, -1, -1])
    assert 5 not in index[0].tolist() and index.shape == (4, 10)
    assert index[1:].tolist() == exact_search(queries[1:], corpus, 10)[1].tolist()


def test_k_larger_than_corpus() -> None:
    queries, corpus = _random(2, 3)
    _, index = exact_search(queries, corpus, 10, corpus_chunk=2)
    assert index.shape == (2, 3) and sorted(index[0].tolist()) == [0, 1, 2]


def test_relevant_ranks_equal_full_sort() -> None:
    queries, corpus = _random(5, 120, seed=3)
    query_index = np.asarray([0, 0, 3, 4])
    doc_index = np.asarray([7, 99, 0, 119])
    ranks = relevant_ranks(queries, corpus, query_index, doc_index, corpus_chunk=13, pair_chunk=3)
    full = torch.argsort(queries @ corpus.T, dim=1, descending=True)
    expected = [int((full[q] == d).nonzero()) + 1 for q, d in zip(query_index, doc_index, strict=True)]
    assert ranks.tolist() == expected


def test_relevant_rank_ignores_the_self_hit() -> None:
    queries, corpus = _random(1, 10, seed=1)
    corpus[2] = queries[0] * 5
    plain = relevant_ranks(queries, corpus, np.asarray([0]), np.asarray([4]))
    dropped = relevant_ranks(queries, corpus, np.asarray([0]), np.asarray([4]), exclude=[2])
    assert dropped[0] == plain[0] - 1


def test_trec_scores_known_values() -> None:
    config = RetrievalConfig(top_k=3, ndcg_k=3, mrr_k=2, recall_k=3, map_k=3)
    qrels = {"perfect": {"a": 1}, "third": {"c": 1}, "missed": {"z": 1}}
    run = {
        "perfect": {"a": 0.9, "b": 0.5, "c": 0.1},
        "third": {"a": 0.9, "b": 0.5, "c": 0.1},
        "missed": {"a": 0.9, "b": 0.5, "c": 0.1},
    }
    scores = trec_scores(qrels, run, config)
    assert scores["perfect"] == {"ndcg@3": 1.0, "mrr@2": 1.0, "recall@3": 1.0, "map@3": 1.0}
    assert scores["third"]["mrr@2"] == 0.0  # rank 3 is beyond the MRR cut-off
    assert scores["third"]["map@3"] == pytest.approx(1 / 3)
    assert scores["third"]["ndcg@3"] == pytest.approx(1 / np.log2(4))
    assert scores["missed"] == {"ndcg@3": 0.0, "mrr@2": 0.0, "recall@3": 0.0, "map@3": 0.0}


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="top_k=5: must be ≥ every cut-off"):
        RetrievalConfig(top_k=5)


def test_perfect_encoder_scores_100(beir_folder: Path, tiny_model) -> None:
    data = read_beir(beir_folder)
    table = {data.doc_texts[0]: [1, 0, 0], data.doc_texts[1]: [0, 1, 0], data.doc_texts[2]: [0, 0, 1]}
    table.update({"why do cats purr": [1, 0.1, 0], "market crash monday": [0.1, 1, 0.2]})
    encoder = TableEncoder(table)
    result = evaluate_retrieval(encoder, data, view=TokenView(tiny_model))
    assert result.scores == {"ndcg@10": 100.0, "mrr@10": 100.0, "recall@100": 100.0, "map@100": 100.0}
    assert {side for side, _ in encoder.calls} == {"query", "document"}
    assert sum(row["count"] for row in result.query_bins) == 2
    found = [row for row in result.document_bins if row["count"]]
    assert found[0]["mean_rank"] == 1.0 and sum(row["corpus_count"] for row in result.document_bins) == 3


def test_self_hits_are_kept_by_default_and_dropped_on_request() -> None:
    # ArguAna-style: query "x" is corpus document "x" (same text); its relevant document is "y"
    data = RetrievalData(
        doc_ids=("x", "y", "z"),
        doc_texts=("text x", "text y", "text z"),
        query_ids=("x",),
        query_texts=("text x",),
        qrels={"x": {"y": 1}},
        source="mem",
    )
    encoder = TableEncoder({"text x": [1, 0, 0], "text y": [0.9, 0.1, 0], "text z": [0, 0, 1]})
    # issue 13.24: self-hits were always dropped; MTEB keeps them unless the task sets ignore_identical_ids
    assert RetrievalConfig().drop_self_hits is False
    assert evaluate_retrieval(encoder, data).scores["mrr@10"] == 50.0
    dropped = evaluate_retrieval(encoder, data, RetrievalConfig(drop_self_hits=True))
    assert dropped.scores["mrr@10"] == 100.0


def _self_judged() -> RetrievalData:
    # the query "x" is corpus document "x" and, unusually, judged relevant to itself; "y" is relevant too
    return RetrievalData(
        doc_ids=("x", "y", "z"),
        doc_texts=("text x", "text y", "text z"),
        query_ids=("x",),
        query_texts=("text x",),
        qrels={"x": {"x": 1, "y": 1}},
        source="mem",
    )


def test_dropped_self_hit_leaves_the_run_when_the_corpus_is_smaller_than_top_k() -> None:
    # issue 13.24: with 3 documents and top_k = 100 the dropped self-hit stayed in the run at score -inf,
    # so it still counted as retrieved (recall@100 = 100 instead of MTEB's 50)
    encoder = TableEncoder({"text x": [1, 0, 0], "text y": [0.9, 0.1, 0], "text z": [0, 0, 1]})
    dropped = evaluate_retrieval(encoder, _self_judged(), RetrievalConfig(drop_self_hits=True))
    assert dropped.scores["recall@100"] == 50.0
    kept = evaluate_retrieval(encoder, _self_judged(), RetrievalConfig(drop_self_hits=False))
    assert kept.scores["recall@100"] == 100.0 and kept.scores["mrr@10"] == 100.0
