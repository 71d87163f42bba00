"""The mteb adapter against the installed mteb v2: protocol, routing, and the same numbers as mteb's own code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mteb  # a dev dependency: these tests fail, never skip, without it
import numpy as np
import pytest

from lengthwise.core.encoder import as_encoder
from lengthwise.evaluation.data import read_beir, read_sts
from lengthwise.evaluation.mteb_adapter import MtebEncoder
from lengthwise.evaluation.retrieval import evaluate_retrieval
from lengthwise.evaluation.sts import evaluate_sts

from .conftest import TableEncoder


def _batches(texts: list[str], size: int = 2) -> list[dict[str, Any]]:
    return [{"text": texts[i : i + size]} for i in range(0, len(texts), size)]


def test_adapter_satisfies_the_encoder_protocol(tiny_model) -> None:
    from mteb.models import EncoderProtocol, ModelMeta

    adapter = MtebEncoder(tiny_model, name="lengthwise/tiny", embed_dim=32, max_tokens=64)
    assert isinstance(adapter, EncoderProtocol)
    meta = adapter.mteb_model_meta
    assert isinstance(meta, ModelMeta) and meta.name == "lengthwise/tiny" and meta.similarity_fn_name == "cosine"


def test_prompt_type_routes_to_query_and_document_sides() -> None:
    from mteb.types import PromptType

    encoder = TableEncoder()
    adapter = MtebEncoder(encoder)
    texts = ["a", "b", "c"]
    query = adapter.encode(
        _batches(texts), task_metadata=None, hf_split="test", hf_subset="default", prompt_type=PromptType.query
    )
    adapter.encode(
        _batches(texts), task_metadata=None, hf_split="test", hf_subset="default", prompt_type=PromptType.document
    )
    adapter.encode(_batches(texts), task_metadata=None, hf_split="test", hf_subset="default")
    assert encoder.calls == [("query", 3), ("document", 3), ("symmetric", 3)]
    assert query.shape == (3, encoder.dim)
    similarity = adapter.similarity(query, query).numpy()
    assert np.allclose(np.diag(similarity), 1.0, atol=1e-6)
    assert np.allclose(adapter.similarity_pairwise(query, query).numpy(), 1.0, atol=1e-6)


def _sts_task(pairs) -> Any:
    from datasets import Dataset, DatasetDict
    from mteb.mocks.mock_tasks.sts import MockSTSTask

    class LocalSTS(MockSTSTask):
        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            rows = {
                "sentence1": [p.text1 for p in pairs.pairs],
                "sentence2": [p.text2 for p in pairs.pairs],
                "score": [p.score for p in pairs.pairs],
            }
            self.dataset = DatasetDict({"test": Dataset.from_dict(rows)})
            self.data_loaded = True

    return LocalSTS()


def _retrieval_task(data) -> Any:
    from datasets import Dataset
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask

    class LocalRetrieval(MockRetrievalTask):
        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            split = RetrievalSplitData(
                queries=Dataset.from_dict({"id": list(data.query_ids), "text": list(data.query_texts)}),
                corpus=Dataset.from_dict(
                    {"id": list(data.doc_ids), "text": list(data.doc_texts), "title": [""] * len(data.doc_ids)}
                ),
                relevant_docs=data.qrels,
                top_ranked=None,
            )
            self.dataset = {"default": {"test": split, "val": split}}
            self.data_loaded = True

    return LocalRetrieval()


def test_sts_agrees_with_mteb_on_real_pairs(tiny_model, data_slices: Path) -> None:
    pairs = read_sts(data_slices / "stsb" / "sts-test.csv.gz").sample(150, seed=0)  # STS-B test rows, checked in
    result = mteb.evaluate(MtebEncoder(tiny_model), _sts_task(pairs), cache=None, show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]
    ours = evaluate_sts(as_encoder(tiny_model), pairs).scores
    assert abs(theirs["cosine_spearman"]) > 0.05
    assert ours["spearman"] == pytest.approx(100 * theirs["cosine_spearman"], abs=0.05)
    assert ours["pearson"] == pytest.approx(100 * theirs["cosine_pearson"], abs=0.05)


def test_retrieval_agrees_with_mteb_on_a_scifact_slice(tiny_model, data_slices: Path) -> None:
    # 25 SciFact test queries, their relevant abstracts and 175 others, checked in (tests/data/README.md)
    data = read_beir(data_slices / "scifact")
    result = mteb.evaluate(MtebEncoder(tiny_model), _retrieval_task(data), cache=None, show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]
    ours = evaluate_retrieval(as_encoder(tiny_model), data).scores
    assert 0 < theirs["ndcg_at_10"] < 1  # a non-trivial ranking, so agreement means something
    assert ours["ndcg@10"] == pytest.approx(100 * theirs["ndcg_at_10"], abs=0.01)
    assert ours["mrr@10"] == pytest.approx(100 * theirs["mrr_at_10"], abs=0.01)
    assert ours["recall@100"] == pytest.approx(100 * theirs["recall_at_100"], abs=0.01)
    assert ours["map@100"] == pytest.approx(100 * theirs["map_at_100"], abs=0.01)


@pytest.mark.parametrize("ignore_identical_ids", [False, True])
def test_self_hits_follow_the_task_as_in_mteb(ignore_identical_ids: bool) -> None:
    # issue 13.24: MTEB drops a retrieved document whose id is the query id only for tasks that set
    # ignore_identical_ids; every query here is a corpus document, and some judge themselves relevant
    from lengthwise.evaluation.config import RetrievalConfig
    from lengthwise.evaluation.data import RetrievalData

    doc_ids = tuple(f"d{i}" for i in range(40))
    texts = tuple(f"document number {i} about topic {i % 7}" for i in range(40))
    queries = doc_ids[:12]
    qrels = {q: {doc_ids[(i * 5 + 3) % 40]: 1, doc_ids[(i * 11 + 1) % 40]: 2} for i, q in enumerate(queries)}
    for q in queries[:4]:
        qrels[q][q] = 1
    data = RetrievalData(doc_ids, texts, queries, texts[:12], qrels, "mem")
    task = _retrieval_task(data)
    task.ignore_identical_ids = ignore_identical_ids
    result = mteb.evaluate(MtebEncoder(TableEncoder()), task, cache=None, show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]
    config = RetrievalConfig(top_k=100, drop_self_hits=ignore_identical_ids)
    ours = evaluate_retrieval(TableEncoder(), data, config).scores
    for name, key in (("ndcg@10", "ndcg_at_10"), ("mrr@10", "mrr_at_10"), ("recall@100", "recall_at_100")):
        assert ours[name] == pytest.approx(100 * theirs[key], abs=0.01), name
    assert (ours["recall@100"] < 100.0) == ignore_identical_ids  # a dropped self-judgement is never found


def test_the_self_hit_table_is_mtebs() -> None:
    from lengthwise.evaluation.tasks import MTEB_DROPS_SELF_HITS, data_name

    installed = {
        data_name(task.metadata.dataset["path"])
        for task in mteb.get_tasks(task_types=["Retrieval"])
        if getattr(task, "ignore_identical_ids", False)
    }
    assert installed == MTEB_DROPS_SELF_HITS
