"""The Haystack retriever: its documents are `LongIndex.search`'s hits (ids, order, scores, passages) from the index
folder, from the index in Milvus and from a running service, run and run_async, in every mode; a pipeline's
component, serialized and loaded again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("haystack")

from haystack import Document, Pipeline
from haystack.core.errors import SerializationError

from lengthwise.core.errors import SettingError
from lengthwise.integrations.haystack import LengthwiseRetriever
from tests.integrations.conftest import MODES, QUERIES, RARE, assert_same_rows, expected_rows, metadata_rows

pytestmark = pytest.mark.usefixtures("one_thread")


def _rows(answer: dict[str, list[Document]]) -> list[tuple[Any, ...]]:
    documents = answer["documents"]
    assert all(isinstance(document, Document) for document in documents)
    return metadata_rows([(d.id, d.score, d.meta) for d in documents])


@pytest.mark.parametrize("mode", MODES)
def test_documents_are_the_librarys_hits_run_and_run_async(where: dict[str, Any], library: Any, mode: str) -> None:
    retriever = LengthwiseRetriever(**where, top_k=5, mode=mode, passages=2)
    for query in QUERIES:
        assert_same_rows(_rows(retriever.run(query)), expected_rows(library, query, 5, mode, passages=2))
    found = asyncio.run(retriever.run_async(QUERIES[1], top_k=3))
    assert_same_rows(_rows(found), expected_rows(library, QUERIES[1], 3, mode, passages=2))


def test_a_pipeline_runs_it_and_loads_it_again(index_dir: Any) -> None:
    pipeline = Pipeline()
    pipeline.add_component("retriever", LengthwiseRetriever(str(index_dir), top_k=1, mode="lexical"))
    answer = pipeline.run({"retriever": {"query": f"where was {RARE} found"}})
    (document,) = answer["retriever"]["documents"]
    assert document.id == "doc7" and RARE in document.content
    again = Pipeline.loads(pipeline.dumps(), allowed_modules=["lengthwise.integrations.haystack"])
    assert again.run({"retriever": {"query": f"where was {RARE} found"}})["retriever"]["documents"] == [document]
    answer = asyncio.run(again.run_async({"retriever": {"query": f"where was {RARE} found"}}))
    assert answer["retriever"]["documents"] == [document]


@pytest.mark.parametrize("source", ["index", "service"])
def test_the_whole_document_on_request(index_dir: Any, library: Any, server: Any, source: str) -> None:
    # before: a service answered passages only, and whole_document=True over one was refused
    where = {"index": str(index_dir)} if source == "index" else {"url": server.url}
    retriever = LengthwiseRetriever(**where, top_k=2, whole_document=True, passages=0)
    documents = retriever.run(QUERIES[0])["documents"]
    assert len(documents) == 2
    for document in documents:
        assert document.content == library.lexical.text(library.numbers[document.id])
        assert document.meta["passages"] == []


def test_refusals_name_the_setting(index_dir: Any, library: Any, server: Any) -> None:
    with pytest.raises(SettingError, match="top_k=0"):
        LengthwiseRetriever(str(index_dir), top_k=0)
    with pytest.raises(SettingError, match="top_k=5000"):  # the service's own cap, named as the retriever names it
        LengthwiseRetriever(url=server.url).run(QUERIES[0], top_k=5000)
    with pytest.raises(SerializationError, match="opened index"):
        LengthwiseRetriever(library).to_dict()
