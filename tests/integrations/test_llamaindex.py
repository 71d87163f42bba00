"""The LlamaIndex retriever: its nodes are `LongIndex.search`'s hits (ids, order, scores, passages) from the index
folder, from the index in Milvus and from a running service, sync and async, in every mode; a query engine's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore

from lengthwise.core.errors import SettingError
from lengthwise.integrations.llamaindex import LengthwiseRetriever
from tests.integrations.conftest import MODES, QUERIES, RARE, assert_same_rows, expected_rows, metadata_rows

pytestmark = pytest.mark.usefixtures("one_thread")


def _rows(nodes: list[NodeWithScore]) -> list[tuple[Any, ...]]:
    assert all(isinstance(node, NodeWithScore) for node in nodes)
    return metadata_rows([(node.node.node_id, node.score, node.node.metadata) for node in nodes])


@pytest.mark.parametrize("mode", MODES)
def test_nodes_are_the_librarys_hits_sync_and_async(where: dict[str, Any], library: Any, mode: str) -> None:
    retriever = LengthwiseRetriever(**where, similarity_top_k=5, mode=mode, passages=2)
    for query in QUERIES:
        nodes = retriever.retrieve(query)
        assert_same_rows(_rows(nodes), expected_rows(library, query, 5, mode, passages=2))
        assert {node.node.metadata["mode"] for node in nodes} == {mode}
    found = asyncio.run(retriever.aretrieve(QUERIES[1]))
    assert_same_rows(_rows(found), expected_rows(library, QUERIES[1], 5, mode, passages=2))


def test_a_node_is_its_text_with_its_span_and_shows_the_llm_only_its_id(where: dict[str, Any], library: Any) -> None:
    retriever = LengthwiseRetriever(**where, similarity_top_k=3, mode="lexical", context=15)
    for found in retriever.retrieve(f"{RARE} under the mill"):
        node = found.node
        text = library.lexical.text(library.numbers[node.node_id])
        assert node.text == text[node.start_char_idx : node.end_char_idx]
        (passage,) = node.metadata["passages"]
        widened = (max(0, passage["start"] - 15), min(len(text), passage["end"] + 15))
        assert (node.start_char_idx, node.end_char_idx) == widened
        assert node.get_content(MetadataMode.LLM) == f"id: {node.node_id}\n\n{node.text}"
    retriever.similarity_top_k = 1
    assert len(retriever.retrieve(QUERIES[0])) == 1


def test_a_query_engine_answers_from_its_nodes(index_dir: Any) -> None:
    retriever = LengthwiseRetriever(str(index_dir), similarity_top_k=1, mode="lexical")
    answer = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query(f"where was {RARE} found")
    assert [node.node.node_id for node in answer.source_nodes] == ["doc7"]


def test_refusals_name_the_setting(index_dir: Any) -> None:
    with pytest.raises(SettingError, match="similarity_top_k=0"):
        LengthwiseRetriever(str(index_dir), similarity_top_k=0)
    with pytest.raises(SettingError, match="passages=0"):
        LengthwiseRetriever(str(index_dir), passages=0)
    with pytest.raises(SettingError, match="query"):
        LengthwiseRetriever(str(index_dir)).retrieve("  ")
