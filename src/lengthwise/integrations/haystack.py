"""A lengthwise index as a Haystack retriever component (``pip install 'lengthwise[haystack]'``;
docs/integrations.md).

Example:
    >>> from lengthwise.integrations.haystack import LengthwiseRetriever                     # doctest: +SKIP
    >>> pipeline.add_component("retriever", LengthwiseRetriever(index="out/index", top_k=5))   # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any

from lengthwise.core._optional import require

require("haystack", extra="haystack", purpose="the Haystack retriever")

from haystack import Document, component, default_from_dict, default_to_dict  # noqa: E402
from haystack.core.errors import SerializationError  # noqa: E402
from haystack.utils import Secret, deserialize_secrets_inplace  # noqa: E402

from lengthwise.integrations._common import RetrievalSettings, Retrieved, Source, open_source  # noqa: E402

__all__ = ["LengthwiseRetriever"]


@component
class LengthwiseRetriever:
    """Long-document retrieval from a lengthwise index: a Haystack component whose ``run`` (and ``run_async``)
    returns ``{"documents": [...]}``, the index's best documents for the query, best first.

    Each `Document` has the document id as ``id``, the fused score as ``score`` (a one-sided mode: that side's) and
    as ``content`` the document's best `passages` (each widened by `context` characters either side), or its whole
    text with `whole_document`. Its ``meta`` holds ``id``, ``score``, ``dense`` and ``lexical`` (each side's exact
    score, None where not scored), ``passages`` (each one's ``window``, ``start``, ``end``, ``score``), ``mode`` and
    ``index`` (backend, model, long-document settings, fusion). The index (or the service's client) is opened by
    ``warm_up``, which a pipeline calls, or by the first run.

    Give exactly one place to search:

    Args:
        index: An index folder (`lengthwise index build`), or an index already opened (`lengthwise.LongIndex.open`;
            such a component cannot be serialized).
        milvus_uri: An index loaded into Milvus: a Milvus Lite ``.db`` path or a server's URL, served as
            `milvus_name` (default ``lengthwise``).
        url: A running `lengthwise serve` (``http://127.0.0.1:8000``), with its `api_key` if it has one (e.g.
            ``Secret.from_env_var("LENGTHWISE_API_KEY")``).
        top_k: Documents returned.
        mode: ``dense``, ``lexical`` or ``hybrid``; None: the index's recorded mode (hybrid when it holds text).
        passages: A document's best windows, which make its text.
        context: Characters of the document either side of each passage.
        whole_document: The document's whole text instead (not through a service).

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
        api_key: Secret | None = None,
        top_k: int = 10,
        mode: str | None = None,
        passages: int = 1,
        context: int = 0,
        whole_document: bool = False,
    ) -> None:
        self.settings = RetrievalSettings(top_k, mode, passages, context, whole_document)
        self.index, self.milvus_uri, self.milvus_name, self.url = index, milvus_uri, milvus_name, url
        self.api_key = api_key
        self._source: Source | None = None

    def warm_up(self) -> None:
        """Open the index, or the service's client (once)."""
        if self._source is None:
            key = self.api_key.resolve_value() if self.api_key is not None else None
            self._source = open_source(self.index, url=self.url, milvus_uri=self.milvus_uri,
                                       milvus_name=self.milvus_name, api_key=key)  # fmt: skip

    @component.output_types(documents=list[Document])
    def run(
        self,
        query: str,
        top_k: int | None = None,
        mode: str | None = None,
        passages: int | None = None,
        context: int | None = None,
        whole_document: bool | None = None,
    ) -> dict[str, list[Document]]:
        """The best documents for `query`; the settings given here replace the component's for this run."""
        self.warm_up()
        assert self._source is not None
        asked = self.settings.overridden(top_k=top_k, mode=mode, passages=passages, context=context,
                                         whole_document=whole_document)  # fmt: skip
        return {"documents": [_document(found) for found in self._source.search(query, asked)]}

    @component.output_types(documents=list[Document])
    async def run_async(
        self,
        query: str,
        top_k: int | None = None,
        mode: str | None = None,
        passages: int | None = None,
        context: int | None = None,
        whole_document: bool | None = None,
    ) -> dict[str, list[Document]]:
        """`run` without blocking the event loop (a local index searches on a worker thread)."""
        self.warm_up()
        assert self._source is not None
        asked = self.settings.overridden(top_k=top_k, mode=mode, passages=passages, context=context,
                                         whole_document=whole_document)  # fmt: skip
        return {"documents": [_document(found) for found in await self._source.asearch(query, asked)]}

    def to_dict(self) -> dict[str, Any]:
        """The component as Haystack serializes it (an index given as a folder, not an opened one)."""
        if self.index is not None and not isinstance(self.index, (str, os.PathLike)):
            raise SerializationError("a LengthwiseRetriever over an opened index cannot be serialized; give the "
                                     "index's folder (index='out/index') instead")  # fmt: skip
        key = None if self.api_key is None else self.api_key.to_dict()
        given = self.settings
        return default_to_dict(
            self, index=None if self.index is None else os.fspath(self.index), milvus_uri=self.milvus_uri,
            milvus_name=self.milvus_name, url=self.url, api_key=key, top_k=given.top_k, mode=given.mode,
            passages=given.passages, context=given.context, whole_document=given.whole_document,
        )  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LengthwiseRetriever:
        """The component `to_dict` wrote."""
        deserialize_secrets_inplace(data["init_parameters"], keys=["api_key"])
        made: LengthwiseRetriever = default_from_dict(cls, data)
        return made


def _document(found: Retrieved) -> Document:
    return Document(id=found.id, content=found.text, meta=found.metadata(), score=found.score)
