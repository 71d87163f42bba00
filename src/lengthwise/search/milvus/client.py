"""The part of `pymilvus.MilvusClient` the Milvus backend calls, as Protocols (pymilvus ships no type information):
collections made, listed, loaded and dropped, rows written, read back and searched. A row read or a hit is a
``Record``: the fields asked for, by name (their values as Milvus returns them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

__all__ = ["Field", "Hits", "IndexParams", "MilvusClient", "Record", "Schema"]

Record = dict[str, Any]  # one row read or one hit: its fields by name, each value as pymilvus decodes it
Hits = Sequence[Record]  # one query's hits, best first (pymilvus's kind also keeps ``ids`` and ``distances`` arrays)


class Field(Protocol):
    """One field of a `Schema` (`pymilvus.FieldSchema`)."""

    @property
    def name(self) -> str: ...


class Schema(Protocol):
    """`pymilvus.CollectionSchema` as a collection is described to be made."""

    @property
    def fields(self) -> Sequence[Field]: ...

    def add_field(self, field_name: str, datatype: object, **kwargs: object) -> object: ...


class IndexParams(Protocol):
    """`pymilvus.milvus_client.IndexParams`: the indexes a collection is made with."""

    def add_index(self, field_name: str, **kwargs: object) -> object: ...


class MilvusClient(Protocol):
    """The calls of `pymilvus.MilvusClient` lengthwise makes (`lengthwise.search.milvus.store.connect` opens one)."""

    def create_schema(self, **kwargs: object) -> Schema: ...

    def prepare_index_params(self) -> IndexParams: ...

    def create_collection(self, collection_name: str, **kwargs: object) -> None: ...

    def has_collection(self, collection_name: str) -> bool: ...

    def describe_collection(self, collection_name: str) -> Mapping[str, Any]: ...

    def list_collections(self) -> list[str]: ...

    def drop_collection(self, collection_name: str) -> None: ...

    def load_collection(self, collection_name: str) -> None: ...

    def release_collection(self, collection_name: str) -> None: ...

    def get_load_state(self, collection_name: str) -> Mapping[str, object]: ...

    def flush(self, collection_name: str) -> None: ...

    def insert(self, collection_name: str, data: Iterable[Record]) -> object: ...

    def upsert(self, collection_name: str, data: Iterable[Record]) -> object: ...

    def delete(self, collection_name: str, **kwargs: object) -> object: ...

    def query(self, collection_name: str, **kwargs: object) -> list[Record]: ...

    def search(self, collection_name: str, data: Sequence[object], **kwargs: object) -> Sequence[Hits]: ...

    def close(self) -> None: ...
