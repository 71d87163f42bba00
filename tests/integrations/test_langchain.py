"""The LangChain retriever: its documents are `LongIndex.search`'s hits (ids, order, scores, passages) from the index
folder, from the index in Milvus and from a running service, sync and async, in every mode; a step of a chain."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from lengthwise.core.errors import SettingError
from lengthwise.integrations.langchain import LengthwiseRetriever
from tests.integrations.conftest import MODES, QUERIES, RARE, assert_same_rows, expected_rows, metadata_rows

pytestmark = pytest.mark.usefixtures("one_thread")


def _rows(documents: list[Document]) -> list[tuple[Any, ...]]:
    assert all(isinstance(document, Document) for document in documents)
    return metadata_rows([(str(d.id), d.metadata["score"], d.metadata) for d in documents])


@pytest.mark.parametrize("mode", MODES)
def test_documents_are_the_librarys_hits_sync_and_async(where: dict[str, Any], library: Any, mode: str) -> None:
    retriever = LengthwiseRetriever(**where, k=5, mode=mode, passages=2)
    for query in QUERIES:
        documents = retriever.invoke(query)
        assert_same_rows(_rows(documents), expected_rows(library, query, 5, mode, passages=2))
        assert {document.metadata["mode"] for document in documents} == {mode}
    assert_same_rows(_rows(asyncio.run(retriever.ainvoke(QUERIES[1]))), expected_rows(library, QUERIES[1], 5, mode, 2))
    if mode == "lexical":
        assert retriever.invoke(QUERIES[1])[0].id == "doc7"


def test_the_text_is_the_best_passage_and_a_call_can_change_the_settings(where: dict[str, Any], library: Any) -> None:
    retriever = LengthwiseRetriever(**where)
    documents = retriever.invoke(f"{RARE} under the mill", k=3, mode="lexical", context=15)
    assert_same_rows(_rows(documents), expected_rows(library, f"{RARE} under the mill", 3, "lexical"))
    for document in documents:
        text = library.lexical.text(library.numbers[document.id])
        (passage,) = document.metadata["passages"]
        start, end = max(0, passage["start"] - 15), passage["end"] + 15
        assert document.page_content == text[start:end]
    assert retriever.invoke(QUERIES[0])[0].metadata["mode"] == "hybrid"  # the index's recorded mode
    assert len(retriever.invoke(QUERIES[0])) == 10


def test_a_chain_reads_the_passages(index_dir: Any) -> None:
    retriever = LengthwiseRetriever(index=str(index_dir), k=1, mode="lexical", context=200)
    chain = retriever | RunnableLambda(lambda documents: "\n\n".join(d.page_content for d in documents))
    answers = chain.batch([f"where was {RARE} found", QUERIES[0]])
    assert RARE in answers[0] and "river" in answers[1]


def test_refusals_name_the_setting(index_dir: Any, where: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="k=0"):
        LengthwiseRetriever(index=str(index_dir), k=0)
    with pytest.raises(ValueError, match="give one place to search"):
        LengthwiseRetriever(index=str(index_dir), url="http://127.0.0.1:9")
    retriever = LengthwiseRetriever(**where)
    with pytest.raises(SettingError, match="mode='fuzzy'"):
        retriever.invoke(QUERIES[0], mode="fuzzy")
    with pytest.raises(SettingError, match="query"):
        retriever.invoke("   ")
