"""The session-43 stages of benchmarks/search/hybrid/: the dense-side aggregations score a document from its windows
as documented (the best window is the index's own multi-vector scoring), and the duplicated stage's corpus is a BEIR
folder of near-copies that differ by one sentence each, with one judged query per document."""

from __future__ import annotations

import importlib
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.search.hybrid")  # run from the repository root


def test_aggregations_score_each_document_from_its_own_windows(bench) -> None:
    from lengthwise.core.encoder import MultiVectors, multi_vector_scores

    rng = np.random.default_rng(0)
    offsets = np.asarray([0, 3, 4, 9])  # documents of 3, 1 and 5 windows
    windows = rng.normal(size=(9, 8)).astype(np.float32)
    windows /= np.linalg.norm(windows, axis=1, keepdims=True)
    queries = rng.normal(size=(2, 8)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    cosines = queries @ windows.T
    best = bench._aggregate(cosines, offsets, "max")
    index = multi_vector_scores(torch.as_tensor(queries), MultiVectors(windows, offsets)).double().numpy()
    np.testing.assert_allclose(best, index, rtol=1e-6)
    for q, (d, (a, b)) in itertools.product(range(2), enumerate(itertools.pairwise(offsets))):
        block = cosines[q, a:b]
        assert bench._aggregate(cosines, offsets, "max-0.25mean")[q, d] == pytest.approx(
            block.max() - 0.25 * block.mean()
        )
        assert bench._aggregate(cosines, offsets, "top2-mean")[q, d] == pytest.approx(np.sort(block)[-2:].mean())


def test_duplicated_corpus_is_near_copies_with_one_sentence_and_one_query_each(bench, tmp_path: Path) -> None:
    from lengthwise.evaluation.data import read_beir

    data = read_beir(bench._duplicated_beir(tmp_path / "beir", 12), "test")
    assert len(data.doc_ids) == 12 and set(data.qrels) == {f"q{n}" for n in range(12)}
    for n, text in enumerate(data.doc_texts):
        assert text.startswith(bench.NOTICE) and text.endswith(bench.NOTICE)
        name = data.query_texts[n].removeprefix("Which cabinet holds the ledger of ").removesuffix("?")
        assert f"The {name} ledger is kept in cabinet" in text and data.qrels[f"q{n}"] == {f"d{n}": 1}
        assert sum(name in other for other in data.doc_texts) == 1  # the name is this document's alone
    lengths = {len(text) for text in data.doc_texts}
    assert len(lengths) >= 6  # the filler is repeated 1 to 6 times


def test_quality_encodes_with_the_model_it_is_given(bench, tmp_path: Path, monkeypatch) -> None:
    """`--model` reached only the synthetic sets' tokenizer before: the corpora were encoded by the default model."""
    import argparse

    import lengthwise as lw

    seen = {}

    def encode(corpus, out, model="the default", **kw):
        seen["model"] = model
        raise RuntimeError("stop after the encode call")

    monkeypatch.setattr(lw, "encode", encode)
    args = argparse.Namespace(work=tmp_path, threads=1, model="/models/all-mpnet-base-v2")
    with pytest.raises(RuntimeError, match="stop after"):
        bench._indexed("tiny", ["d0"], ["one text"], args)
    assert seen["model"] == "/models/all-mpnet-base-v2"


def test_a_second_model_is_written_beside_the_default_table(bench, tmp_path: Path, monkeypatch) -> None:
    """Another model's table goes to `quality_models` (the default's `quality` table untouched), with the rule
    applied to its own dev sets and the default arm's standing on every set it ran."""
    import json

    results = tmp_path / "bench_hybrid.json"
    arms = ("dense", "bm25-document", "bm25-window", "convex-window-0.1", "convex-window-0.2")
    minilm = {s: dict(zip(arms, (50, 40, 45, 60, 55), strict=True)) for s in ("qmsum-dev", "scifact-dev")}
    results.write_text(json.dumps({"quality": {"table": minilm}}))
    monkeypatch.setattr(bench._common, "RESULTS", results)  # patched where the stages read it (_common)
    mpnet = {"qmsum-dev": dict(zip(arms, (52, 40, 45, 57, 58), strict=True)),
             "scifact-dev": dict(zip(arms, (70, 60, 50, 72, 73), strict=True)),
             "qmsum-test": dict(zip(arms, (54, 41, 44, 59, 61), strict=True))}  # fmt: skip
    bench._write_model_check("/models/all-mpnet-base-v2", mpnet, {"seconds": 1})
    out = json.loads(results.read_text())
    assert out["quality"]["table"] == minilm
    check = out["quality_models"]["all-mpnet-base-v2"]
    assert check["default"] == "convex-window-0.1"
    assert check["chosen_here"]["chosen"] == "convex-window-0.2"  # dev mean 65.5 against 0.1's 64.5
    row = check["default_by_set"]["qmsum-test"]
    assert row == {"default": 59, "best": 61, "best_arm": "convex-window-0.2", "dense": 54, "bm25_best": 44}


def test_a_run_of_some_sets_keeps_the_run_fields_of_the_rows_it_did_not_redo(bench) -> None:
    full = {"seconds": 328, "load": [3.6, 3.8], "lengths": [256], "per_length": {"dev": 20, "test": 20}}
    partial = {"seconds": 704, "load": [2.2, 2.2], "lengths": [256], "per_length": {"dev": 4, "test": 10}}
    records = bench._run_records(full, partial, ["replies"])
    assert {k: records[k] for k in bench.RUN_FIELDS} == full  # the other corpora's rows came from that run
    assert records["runs"] == {"replies": {**partial, "sets": ["replies"]}}
    again = bench._run_records({**records, "seconds": 1}, full, list(bench.SETS))
    assert again["seconds"] == 328 and again["runs"]["replies"]["sets"] == list(bench.SETS)


def test_the_both_granularities_arms_are_what_an_index_of_granularity_both_serves(bench) -> None:
    """The study's ``*-both`` arms (`_both`) are scored as `lengthwise.search.fusion.fuse_exact` scores an index that
    holds both BM25 granularities (the lexical sides stacked document first, then window): the same fused scores, so
    the table's rows are the served default's."""
    from lengthwise.core.fusion import Fusion
    from lengthwise.search.fusion import fuse_exact
    from lengthwise.search.types import DEPTH, FusionSettings

    rng = np.random.default_rng(3)
    n = 3 * DEPTH  # more documents than each side proposes: the candidates matter
    dense = rng.uniform(-0.2, 0.9, size=(4, n))
    document, window = (np.where(rng.random((4, n)) < 0.3, 0.0, rng.gamma(2.0, 3.0, size=(4, n))) for _ in "dw")
    matrices = {"dense": dense, "document": document, "window": window}
    for weight, settings in ((0.3, FusionSettings(Fusion.ZSCORE, 0.3)), (None, FusionSettings(Fusion.ADAPTIVE)),
                             (-1.0, FusionSettings(Fusion.RRF))):  # fmt: skip
        served = np.stack([fuse_exact(d, np.stack([doc, win]), settings, DEPTH)
                           for d, doc, win in zip(dense, document, window, strict=True)])  # fmt: skip
        np.testing.assert_array_equal(served, bench._both(matrices, weight))
