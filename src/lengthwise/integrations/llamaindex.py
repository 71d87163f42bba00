"""A lengthwise index as a LlamaIndex retriever (``pip install 'lengthwise[llamaindex]'``; docs/integrations.md).

Example:
    >>> from lengthwise.integrations.llamaindex import LengthwiseRetriever                      # doctest: +SKIP
    >>> retriever = LengthwiseRetriever(index="out/index", similarity_top_k=5)                  # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)                             # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any

from lengthwise.core._optional import require

require("llama_index.core", extra="llamaindex", purpose="the LlamaIndex retriever")

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.callbacks import CallbackManager  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from lengthwise.integrations._common import RetrievalSettings, Retrieved, open_source  # noqa: E402

__all__ = ["LengthwiseRetriever"]

SHOWN = ("id",)  # the metadata an LLM or an embedding sees with a node's text (LlamaIndex prepends it)


class LengthwiseRetriever(BaseRetriever):
    """Long-document retrieval from a lengthwise index: a LlamaIndex `BaseRetriever` (``retrieve``,
    ``aretrieve``, a query engine's retriever) whose nodes are the index's best documents for the query, best first.

    Each `NodeWithScore` has the fused score (a one-sided mode: that side's); its `TextNode`'s ``id_`` is the
    document id and its text the document's best `passages` (each widened by `context` characters either side), or
    its whole text with `whole_document`; ``start_char_idx``/``end_char_idx`` are that text's span in the document
    when it is one piece. The node's ``metadata`` holds ``id``, ``score``, ``dense`` and ``lexical`` (each side's
    exact score, None where not scored), ``passages`` (each one's ``window``, ``start``, ``end``, ``score``),
    ``mode`` and ``index`` (backend, model, long-document settings, fusion); only ``id`` is shown to the LLM.

    Give exactly one place to search:

    Args:
        index: An index folder (`lengthwise index build`), or an index already opened (`lengthwise.LongIndex.open`,
            `lengthwise.facade.open_index`).
        milvus_uri: An index loaded into Milvus: a Milvus Lite ``.db`` path or a server's URL, served as
            `milvus_name` (default ``lengthwise``).
        url: A running `lengthwise serve` (``http://127.0.0.1:8000``), with its `api_key` if it has one.
        similarity_top_k: Documents returned.
        mode: ``dense``, ``lexical`` or ``hybrid``; None: the index's recorded mode (hybrid when it holds text).
        passages: A document's best windows, which make its text.
        context: Characters of the document either side of each passage.
        whole_document: The document's whole text instead (not through a service).
        callback_manager, verbose: as every LlamaIndex retriever's.

    Raises:
        SettingError: (a ``ValueError``) a setting that cannot be used, naming it; a query the index cannot answer.
    """

    def __init__(
        self,
        index: str | os.PathLike[str] | Any = None,
        *,
        milvus_uri: str | None = None,
        milvus_name: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        similarity_top_k: int = 10,
        mode: str | None = None,
        passages: int = 1,
        context: int = 0,
        whole_document: bool = False,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.settings = RetrievalSettings(similarity_top_k, mode, passages, context, whole_document,
                                          top_k_name="similarity_top_k")  # fmt: skip
        self.source = open_source(index, url=url, milvus_uri=milvus_uri, milvus_name=milvus_name, api_key=api_key)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def similarity_top_k(self) -> int:
        """Documents returned (settable, as on LlamaIndex's own retrievers)."""
        return self.settings.top_k

    @similarity_top_k.setter
    def similarity_top_k(self, value: int) -> None:
        self.settings = self.settings.overridden(top_k=value)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(found) for found in self.source.search(query_bundle.query_str, self.settings)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_node(found) for found in await self.source.asearch(query_bundle.query_str, self.settings)]


def _node(found: Retrieved) -> NodeWithScore:
    metadata = found.metadata()
    hidden = [key for key in metadata if key not in SHOWN]
    start, end = found.span if found.span is not None else (None, None)
    node = TextNode(id_=found.id, text=found.text, metadata=metadata, excluded_llm_metadata_keys=hidden,
                    excluded_embed_metadata_keys=hidden, start_char_idx=start, end_char_idx=end)  # fmt: skip
    return NodeWithScore(node=node, score=found.score)
