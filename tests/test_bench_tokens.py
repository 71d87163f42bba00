"""The token study's benchmarks: MUVERA's fixed-dimensional encoding as benchmarks/search/token_first_stage.py
writes it (a document's empty buckets take the nearest occupied bucket's first token, a query's buckets sum and a
document's average), and a second model's rows written apart from the default model's."""

from __future__ import annotations

import importlib

import numpy as np
import pytest


@pytest.fixture(scope="module")
def stage():
    return importlib.import_module("benchmarks.search.token_first_stage")  # run from the repository root


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def test_a_one_token_document_fills_every_bucket_with_that_token(stage) -> None:
    fde = stage.Fde(dim=16, k=3, p=8, r=4, seed=1)
    token = _unit(np.random.default_rng(0).normal(size=(1, 16)))
    encoded = fde.encode(token, document=True).reshape(4, 8, 8)
    expected = np.einsum("d,rdp->rp", token[0], fde.projections)  # each repetition's projection of the token
    np.testing.assert_allclose(encoded, np.broadcast_to(expected[:, None, :], encoded.shape), rtol=1e-5, atol=1e-6)
    assert fde.dims == 4 * 8 * 8


def test_a_query_sums_its_buckets_and_a_document_averages_them(stage) -> None:
    fde = stage.Fde(dim=16, k=2, p=16, r=1, seed=2)
    same = _unit(np.random.default_rng(1).normal(size=(1, 16)))
    twice = np.concatenate([same, same])  # two copies land in one bucket
    query, document = fde.encode(twice, document=False), fde.encode(twice, document=True)
    single = fde.encode(same, document=False)
    np.testing.assert_allclose(query, 2 * single, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(document, fde.encode(same, document=True), rtol=1e-5, atol=1e-6)


def test_a_second_models_rows_go_under_models_and_keep_the_defaults(tmp_path, monkeypatch) -> None:
    import argparse
    import json

    tokens = importlib.import_module("benchmarks.search.tokens")
    results = tmp_path / "token_side.json"
    results.write_text(json.dumps({"table": {"qmsum-dev": {"hybrid": 57.0}}, "runs": [{"sets": ["qmsum"]}]}))
    monkeypatch.setattr(tokens, "RESULTS", results)
    other = argparse.Namespace(model="/models/all-mpnet-base-v2", default_codec="pca512-bin", rescore=100)
    tokens._merged(other, {"table": {"scifact-dev": {"hybrid": 90.0}}}, "runs", {"sets": ["scifact"]})
    tokens._merged(other, {"table": {"scifact-test": {"hybrid": 89.0}}}, "runs", {"sets": ["scifact"]})
    default = argparse.Namespace(model=tokens.DEFAULT_MODEL, default_codec="bin", rescore=100)
    tokens._merged(default, {"table": {"qmsum-test": {"hybrid": 65.0}}}, "runs", {"sets": ["qmsum"]})
    written = json.loads(results.read_text())
    assert written["table"] == {"qmsum-dev": {"hybrid": 57.0}, "qmsum-test": {"hybrid": 65.0}}
    assert len(written["runs"]) == 2
    mpnet = written["models"]["all-mpnet-base-v2"]
    assert mpnet["table"] == {"scifact-dev": {"hybrid": 90.0}, "scifact-test": {"hybrid": 89.0}}
    assert (mpnet["model"], mpnet["default_codec"], len(mpnet["runs"])) == (other.model, "pca512-bin", 2)
