"""The long encoder with the rest of lengthwise: TempScale roles, exact multi-vector retrieval, multi-vector maths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengthwise.core.encoder import MultiVectors, multi_vector_scores
from lengthwise.longdoc import LongEncoder, Strategy

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["The river runs past the old mill.", "Farmers grow wheat and barley in the valley."]


@pytest.mark.parametrize("strategy", [s.value for s in Strategy])
def test_every_strategy_reads_query_and_document_temperatures(tiny_model, strategy: str) -> None:
    from lengthwise.tempscale import TempScaleConfig, tempscale

    encoder = LongEncoder(tiny_model, strategy=strategy)
    plain = encoder.encode_documents(TEXTS)
    config = TempScaleConfig(t=1.0, t_query=0.05, t_doc=20.0)  # far apart: random attention is nearly flat
    with tempscale(tiny_model, config):
        expected_q = tiny_model.encode_query(TEXTS, convert_to_numpy=True)
        expected_d = tiny_model.encode_document(TEXTS, convert_to_numpy=True)
        queries = encoder.encode_queries(TEXTS)
        documents = encoder.encode_documents(TEXTS)
        symmetric = encoder.encode(TEXTS)
    np.testing.assert_allclose(queries, expected_q, atol=1e-5)
    np.testing.assert_allclose(documents, expected_d, atol=1e-5)
    np.testing.assert_allclose(symmetric, plain, atol=1e-5)  # t = 1 for symmetric use
    assert np.abs(queries - documents).max() > 1e-4  # the two roles really differ (float noise ~1e-7)
    np.testing.assert_allclose(encoder.encode_documents(TEXTS), plain, atol=1e-6)  # no stale cached vectors


def test_multi_vector_scores_match_brute_force() -> None:
    generator = np.random.default_rng(0)
    vectors = generator.normal(size=(9, 5)).astype(np.float32)
    offsets = np.asarray([0, 2, 3, 7, 9])
    queries = torch.nn.functional.normalize(torch.as_tensor(generator.normal(size=(3, 5)), dtype=torch.float32), dim=-1)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for k in (1, 2, 3):
        got = multi_vector_scores(queries, MultiVectors(vectors, offsets), k).numpy()
        for d in range(4):
            sims = queries.numpy() @ unit[offsets[d] : offsets[d + 1]].T  # (3, w)
            best = -np.sort(-sims, axis=1)[:, :k]
            np.testing.assert_allclose(got[:, d], best.mean(axis=1), atol=1e-6)
        stored = multi_vector_scores(queries, MultiVectors(unit.astype(np.float32), offsets), k, unit=True).numpy()
        np.testing.assert_allclose(stored, got, atol=1e-6)  # vectors stored unit (an index's): not normalised again
    skipped = multi_vector_scores(queries, MultiVectors(2 * vectors, offsets), 1, unit=True).numpy()
    assert not np.allclose(skipped, multi_vector_scores(queries, MultiVectors(vectors, offsets), 1).numpy())


def test_retrieval_ranks_multi_vector_documents_exactly(tiny_model) -> None:
    from lengthwise.evaluation.data import RetrievalData
    from lengthwise.evaluation.retrieval import evaluate_retrieval

    filler = " ".join(["winter snow covers the higher fields"] * 40)
    docs = (f"{filler} the secret word of anna is lantern.", f"{filler} nothing here.", "a short note on bread.")
    data = RetrievalData(
        doc_ids=("d0", "d1", "d2"),
        doc_texts=docs,
        query_ids=("q0",),
        query_texts=("the secret word of anna is lantern",),
        qrels={"q0": {"d0": 1}},
        source="test",
    )
    encoder = LongEncoder(tiny_model, strategy="multi-vector", window=32)
    result = evaluate_retrieval(encoder, data)
    windows = encoder.encode_documents_multi(docs)
    query = torch.nn.functional.normalize(torch.as_tensor(encoder.encode_queries(data.query_texts)), dim=-1)
    expected = multi_vector_scores(query, windows).numpy()[0]
    rank = 1 + int((expected > expected[0]).sum())
    assert result.scores["mrr@10"] == pytest.approx(100.0 / rank)
