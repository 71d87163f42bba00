"""benchmarks/bench_hybrid.py's session-43 stages: the dense-side aggregations score a document from its windows as
documented (the best window is the index's own multi-vector scoring), and the duplicated stage's corpus is a BEIR
folder of near-copies that differ by one sentence each, with one judged query per document."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_hybrid.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT, "bench_hybrid_stages")


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
