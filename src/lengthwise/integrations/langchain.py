"""A lengthwise index as a LangChain retriever (``pip install 'lengthwise[langchain]'``; docs/integrations.md).

Example:
    >>> from lengthwise.integrations.langchain import LengthwiseRetriever                  # doctest: +SKIP
    >>> retriever = LengthwiseRetriever(index="out/index", k=5)       # or url="http://127.0.0.1:8000"  # doctest: +SKIP
    >>> chain = retriever | (lambda docs: "\\n\\n".join(d.page_content for d in docs))    # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Literal

from lengthwise.core._optional import require

require("langchain_core", extra="langchain", purpose="the LangChain retriever")

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import PrivateAttr, SecretStr  # noqa: E402

from lengthwise.integrations._common import RetrievalSettings, Retrieved, Source, open_source  # noqa: E402

__all__ = ["LengthwiseRetriever"]


class LengthwiseRetriever(BaseRetriever):
    """Long-document retrieval from a lengthwise index: a LangChain `BaseRetriever` (``invoke``, ``ainvoke``,
    ``batch``, a step of a chain) whose `Document`s are the index's best documents for the query, best first.

    A document's ``page_content`` is its best `passages` (each widened by `context` characters either side), or its
    whole text with `whole_document`; its ``id`` is the document id; its ``metadata`` holds ``id``, ``score`` (the
    fused score; a one-sided mode: that side's), ``dense`` and ``lexical`` (each side's exact score, None where not
    scored), ``passages`` (each one's ``window``, ``start``, ``end`` in the document's characters, ``score``),
    ``mode`` and ``index`` (backend, model, long-document settings, fusion). The settings can be changed for one
    call: ``retriever.invoke("query", k=3, mode="lexical")``.

    Give exactly one place to search:

    Args:
        index: An index folder (`lengthwise index build`), or an index already opened (`lengthwise.LongIndex.open`,
            `lengthwise.facade.open_index`).
        milvus_uri: An index loaded into Milvus: a Milvus Lite ``.db`` path or a server's URL, served as
            `milvus_name` (default ``lengthwise``).
        url: A running `lengthwise serve` (``http://127.0.0.1:8000``), with its `api_key` if it has one.
        k: Documents returned.
        mode: ``dense``, ``lexical`` or ``hybrid``; None: the index's recorded mode (hybrid when it holds text).
        passages: A document's best windows, which make its text.
        context: Characters of the document either side of each passage.
        whole_document: The document's whole text instead (not through a service).

    Raises:
        SettingError: (a ``ValueError``) a setting that cannot be used, naming it; a query the index cannot answer.
    """

    index: Any = None
    milvus_uri: str | None = None
    milvus_name: str | None = None
    url: str | None = None
    api_key: SecretStr | None = None
    k: int = 10
    mode: Literal["dense", "lexical", "hybrid"] | None = None
    passages: int = 1
    context: int = 0
    whole_document: bool = False
    _settings: RetrievalSettings = PrivateAttr()
    _source: Source = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Check the settings and open the index (or the service's client)."""
        self._settings = RetrievalSettings(self.k, self.mode, self.passages, self.context, self.whole_document,
                                           top_k_name="k")  # fmt: skip
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        self._source = open_source(self.index, url=self.url, milvus_uri=self.milvus_uri, milvus_name=self.milvus_name,
                                   api_key=key)  # fmt: skip

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        mode: str | None = None,
        passages: int | None = None,
        context: int | None = None,
        whole_document: bool | None = None,
    ) -> list[Document]:
        asked = self._settings.overridden(top_k=k, mode=mode, passages=passages, context=context,
                                          whole_document=whole_document)  # fmt: skip
        return [_document(found) for found in self._source.search(query, asked)]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        mode: str | None = None,
        passages: int | None = None,
        context: int | None = None,
        whole_document: bool | None = None,
    ) -> list[Document]:
        asked = self._settings.overridden(top_k=k, mode=mode, passages=passages, context=context,
                                          whole_document=whole_document)  # fmt: skip
        return [_document(found) for found in await self._source.asearch(query, asked)]


def _document(found: Retrieved) -> Document:
    return Document(page_content=found.text, metadata=found.metadata(), id=found.id)
