"""The long encoder through the mteb adapter: mteb's own retrieval scoring agrees with lengthwise's, offline.

mteb's LongEmbed tasks (LEMBPasskeyRetrieval, …) need the hub; offline the same path is checked on a local slice
of the synthetic passkey task, whose documents are longer than the window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mteb  # a dev dependency
import pytest

from lengthwise.evaluation.data import read_beir
from lengthwise.evaluation.mteb_adapter import MtebEncoder
from lengthwise.evaluation.retrieval import evaluate_retrieval
from lengthwise.longdoc import LongEncoder
from lengthwise.longdoc.tasks.synthetic import make_synthetic, write_synthetic

pytestmark = pytest.mark.usefixtures("one_thread")

HAYSTACK = (Path(__file__).parent / "haystack.txt").read_text(encoding="utf-8").splitlines()


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


@pytest.mark.parametrize("strategy", ["chunk-weighted", "late-chunking"])
def test_long_encoder_scores_the_same_through_mteb(tiny_model, tmp_path: Path, strategy: str) -> None:
    synthetic = make_synthetic(
        "needle", HAYSTACK, tiny_model.tokenizer, style="simple", lengths=(100, 300), per_length=6, seed=0
    )
    data = read_beir(write_synthetic(synthetic, tmp_path / "needle"), "test")
    encoder = LongEncoder(tiny_model, strategy=strategy, window=32)
    result = mteb.evaluate(MtebEncoder(encoder), _retrieval_task(data), cache=None, show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]
    ours = evaluate_retrieval(encoder, data).scores
    assert ours["ndcg@10"] == pytest.approx(100 * theirs["ndcg_at_10"], abs=0.01)
    assert ours["mrr@10"] == pytest.approx(100 * theirs["mrr_at_10"], abs=0.01)
