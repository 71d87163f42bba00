"""An index served from Milvus: embedded (Milvus Lite, a folder) for one user, a Milvus server or cluster (a URL)
for many, through the same pymilvus code (docs/engines.md says why Milvus and what was measured).

`MilvusIndex` holds the served windows (`lengthwise.search.milvus.windows.MilvusWindows`), the engine's BM25 sides
(`lengthwise.search.milvus.lexical.EngineLexical`) and the query model, and is searched as
`lengthwise.search.index.LongIndex` is (`Searchable`): a document gets the score it gets from the local index. Beside
the windows collection, a records collection holds the index settings, the document ids, each document's first
window, each BM25 side's vocabulary and each document's text with its windows' spans
(`lengthwise.search.milvus.store`). A load is `lengthwise.search.milvus.load`'s.

Example (an index loaded before, by `load_into_milvus` or ``lengthwise index build --backend milvus``):
    >>> engine = lengthwise.MilvusIndex.open("out/milvus.db", "scifact")       # doctest: +SKIP
    >>> hits = engine.search(["who wrote the report?"], k=10, mode="hybrid")  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lengthwise.core.errors import LongDocError
from lengthwise.search.milvus.client import MilvusClient
from lengthwise.search.milvus.lexical import EngineLexical, engine_sides
from lengthwise.search.milvus.store import (
    RECORDS,
    check_name,
    connect,
    engine_kind,
    ensure_loaded,
    read_records,
    served_collection,
)
from lengthwise.search.milvus.windows import MilvusWindows
from lengthwise.search.query_model import QueryModel
from lengthwise.search.searchable import Searchable

if TYPE_CHECKING:
    from lengthwise.core.models import ModelLoader
    from lengthwise.search.protocols import WindowMethod
    from lengthwise.search.types import IndexSettings

__all__ = ["MilvusIndex"]


@dataclass(eq=False, repr=False)
class MilvusIndex(Searchable):
    """A window index served from Milvus, searched as `LongIndex` is: the same document scores. Load one with
    `load_into_milvus`, open it with `open`."""

    windows: MilvusWindows
    queries: QueryModel
    settings: IndexSettings
    engine_lexical: EngineLexical | None = None

    @classmethod
    def open(
        cls,
        uri: str,
        name: str = "lengthwise",
        *,
        load_model: ModelLoader | None = None,
        method: WindowMethod | None = None,
    ) -> MilvusIndex:
        """Open the index served as `name` at `uri`; `load_model` loads its query model by name, `method` is the
        long-document method that made its windows (default: the class's).

        Raises:
            LongDocError: Nothing complete is served under `name` there (the message names the URI and the fix).
        """
        chosen = cls._method(method)
        client = connect(uri)
        collection = served_collection(client, check_name(name))
        if collection is None:
            raise LongDocError(None, None, f"{uri}: no index is served as {name!r}; load one with "
                               "lengthwise index build --backend milvus")  # fmt: skip
        ensure_loaded(client, collection, collection + RECORDS)
        keys = ["settings", "doc_ids", "offsets", "lexical", "lexical_document"]
        found = read_records(client, collection + RECORDS, keys)
        offsets = np.asarray(found["offsets"], dtype=np.int64)
        lexical = None
        if "lexical" in found:
            sides = engine_sides(client, collection, found, f"{uri}: the index served as {name!r}")
            lexical = EngineLexical(client, collection, found["lexical"]["settings"], sides, offsets)
        settings = found["settings"]
        windows = MilvusWindows(client, uri, collection, found["doc_ids"], offsets, engine_kind(uri))
        queries = QueryModel(settings.get("model", {}), settings["encode_settings"], chosen, load_model)
        return cls(windows, queries, settings, lexical)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r}, {self.collection!r})"

    @property
    def store(self) -> MilvusWindows:  # type: ignore[override]
        return self.windows

    @property
    def lexical(self) -> EngineLexical | None:
        return self.engine_lexical

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.windows.uri

    @property
    def uri(self) -> str:
        return self.windows.uri

    @property
    def collection(self) -> str:
        """The windows collection the served name named when opened."""
        return self.windows.collection

    @property
    def client(self) -> MilvusClient:
        """The `pymilvus.MilvusClient` the index reads through."""
        return self.windows.client

    @property
    def kind(self) -> str:
        """The engine (`lengthwise.search.milvus.store.engine_kind`)."""
        return self.windows.kind

    def without_text(self) -> str:
        return (f"{self.uri} holds no BM25 weights (loaded from an index built without text); load it from one built "
                "with the corpus, or search dense")  # fmt: skip
