"""Loading a built local index into Milvus (`load_into_milvus`; `lengthwise.search.milvus.index` says
what the rows hold and how they are searched).

Loading is idempotent and resumable: the collection of a load is named by what its rows are made of (`_load_id`:
the index's settings and shards, its lexical settings, granularity included), rows are inserted by window (then
document) number in batches, and the records collection notes the last batch written, so a load run again after an
interruption deletes any row past that batch and goes on from there (an insert, not an upsert: Milvus Lite 2.5's
upsert slows as the collection grows). The records are written last, each collection is flushed and loaded again
(served from sealed, indexed segments; `_settled`), and only then does the served name's one record (the collection
``name + SERVED``) name the new collection: a half-loaded collection is never served. An open index reads the
collection the name named when it opened; the load that replaces it keeps that one (and drops older ones). A record,
not a Milvus alias, names it: Milvus Lite 2.5 has no aliases, and a record works on every Milvus.

Example:
    >>> local = LongIndex.open("out/index")                        # doctest: +SKIP
    >>> engine = load_into_milvus(local, "out/milvus.db", "scifact")  # doctest: +SKIP
    >>> hits = engine.search(["who wrote the report?"], k=10)     # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.search.lexical.bm25 import BothGranularities, LexicalIndex
from lengthwise.search.lexical.bm25s_calls import Bm25Tokenizer
from lengthwise.search.milvus.client import IndexParams, MilvusClient, Record, Schema
from lengthwise.search.milvus.index import MilvusIndex
from lengthwise.search.milvus.store import (
    DOCUMENTS,
    RECORDS,
    SERVED,
    TEXT,
    check_name,
    connect,
    dense_index,
    engine_kind,
    ensure_loaded,
    load_collection,
    read_records,
    served_collection,
    write_records,
)

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from lengthwise.search.index import LongIndex

__all__ = ["load_into_milvus"]

# windows per insert: Milvus Lite 2.5's insert costs more a row the larger its batch (0.13 ms at 500, 0.35 at 2,000,
# 2.6 at 5,000), an upsert more the larger the collection (`benchmarks/search/milvus_lite25.py`)
BATCH = 500
NO_TERM = 2**32 - 2  # the one term of a window without any (Milvus's largest sparse index; no query holds it)
MUTABLE = ("generation", "mode", "fusion", "tuned")  # lexical settings that change no window row (the records say them)
Progress = Callable[[int, int], None] | None


def _windows_schema(client: MilvusClient, dim: int, kind: str, sparse: bool) -> tuple[Schema, IndexParams]:
    """The windows collection: each window's row, document number and vector, and with `sparse` (an index with BM25
    over its windows) its BM25 weights. Without it the collection has no sparse field, so a dense index loads into
    a Milvus without sparse vectors (2.3) and stores no placeholder weights."""
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)  # the window's row (as the local index's vectors)
    schema.add_field("doc", DataType.INT64)  # its document's number
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    params = client.prepare_index_params()
    params.add_index("dense", **dense_index(kind))
    if sparse:
        schema.add_field("bm25", DataType.SPARSE_FLOAT_VECTOR)  # its row of the bm25s score matrix
        params.add_index("bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    return schema, params


def _has_sparse(client: MilvusClient, collection: str) -> bool:
    """Whether `collection` has the BM25 field (a load begun by an earlier lengthwise always made one)."""
    return any(field.get("name") == "bm25" for field in client.describe_collection(collection)["fields"])


def _documents_schema(client: MilvusClient) -> tuple[Schema, IndexParams]:
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)  # the document's number
    schema.add_field("bm25", DataType.SPARSE_FLOAT_VECTOR)  # its row of the whole-document bm25s score matrix
    params = client.prepare_index_params()
    params.add_index("bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    return schema, params


def _records_schema(client: MilvusClient) -> tuple[Schema, IndexParams]:
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False)
    schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field("value", DataType.VARCHAR, max_length=65_535)
    schema.add_field("unused", DataType.FLOAT_VECTOR, dim=2)  # Milvus needs a vector field in every collection
    params = client.prepare_index_params()
    params.add_index("unused", index_type="FLAT", metric_type="IP")
    return schema, params


def _window_side(lexical: LexicalIndex | BothGranularities) -> LexicalIndex:
    """The side that holds the texts, the windows' spans and the vocabulary a lexical search ranks by: the window
    side when both granularities are held."""
    return lexical.window if isinstance(lexical, BothGranularities) else lexical


class PassageTexts(TypedDict):
    """The record ``text/N``: document N's text and its windows' character spans."""

    text: str
    spans: list[list[int]]


class Vocabulary(TypedDict):
    """What bm25s's tokenizer needs to give a query the term ids of one BM25 side."""

    word_to_stem: dict[str, str]
    stem_to_sid: dict[str, int]
    word_to_id: dict[str, int]


def _texts(lexical: LexicalIndex | BothGranularities, offsets: np.ndarray) -> Iterator[tuple[str, PassageTexts]]:
    """Each document's text and its windows' character spans, as the records ``text/N`` (passages)."""
    texts = _window_side(lexical)
    for doc in range(len(offsets) - 1):
        spans = np.asarray(texts.spans[int(offsets[doc]) : int(offsets[doc + 1])]).tolist()
        yield f"{TEXT}{doc}", {"text": texts.text(doc), "spans": spans}


def _load_id(index: LongIndex) -> str:
    """The name of a load of `index`: what its rows are made of (its settings and shard digests, its lexical
    settings), not its generation or tuned fusion, so the same load run again resumes it, also from a rebuild of the
    same shards (`lengthwise index build --backend milvus` run again after a Ctrl-C in the load)."""
    lexical = {} if index.lexical is None else dict(index.lexical.settings)
    made = {"settings": {key: value for key, value in index.settings.items() if key != "generation"},
            "lexical": {key: value for key, value in lexical.items() if key not in MUTABLE}}  # fmt: skip
    return hashlib.sha256(json.dumps(made, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _unit_weights(lexical: LexicalIndex, units: int) -> csr_matrix:
    """(units, V) each window's (or, at granularity document, each document's) BM25 term scores (CSR), from
    bm25s's (term-major) score matrix."""
    from scipy.sparse import csc_matrix

    scores = lexical.retriever.scores
    vocabulary = len(scores["indptr"]) - 1
    return csc_matrix((scores["data"], scores["indices"], scores["indptr"]), shape=(units, vocabulary)).tocsr()


def _sides(lexical: LexicalIndex | BothGranularities | None) -> dict[str, LexicalIndex]:
    """The local index's BM25 by granularity (``window``, ``document``; both for `BothGranularities`); none without
    text."""
    if lexical is None:
        return {}
    if isinstance(lexical, BothGranularities):
        return {"window": lexical.window, "document": lexical.document}
    return {str(lexical.settings.get("granularity", "window")): lexical}


def load_into_milvus(
    index: LongIndex, uri: str, name: str = "lengthwise", *, batch: int = BATCH, on_progress: Progress = None
) -> MilvusIndex:
    """Load a built local index (`LongIndex.open`) into Milvus at `uri` as collection `name` (see the module
    docstring): resumable, and served under `name` only once complete.

    Args:
        index: The local index (its window vectors, document ids, settings, and lexical side when it has one).
        uri: A path (embedded Milvus Lite) or a server's URL (`connect`).
        name: The name it is served under (a record of the collection ``name + SERVED``).
        batch: Windows per insert.
        on_progress: Called with (windows loaded, windows) after each batch of windows (the documents' texts, for
            passages, are written after the windows).

    Returns:
        The loaded index, opened (`MilvusIndex.open`).
    """
    client, name = connect(uri), check_name(name)
    if batch < 1:
        raise SettingError("batch", batch, "must be ≥ 1")
    windows, sides = f"{name}__{_load_id(index)}", _sides(index.lexical)
    records, documents = windows + RECORDS, windows + DOCUMENTS
    wanted = [
        (windows, _windows_schema(client, index.vectors.shape[1], engine_kind(uri), "window" in sides)),
        (records, _records_schema(client)),
    ]
    if "document" in sides:  # whole-document BM25: one row per document
        wanted.append((documents, _documents_schema(client)))
    for collection, (schema, params) in wanted:
        if not client.has_collection(collection):
            _create(client, uri, collection, schema, params)
    ensure_loaded(client, *[collection for collection, _ in wanted])  # released, when another process resumes it
    done = int(read_records(client, records, ["progress"]).get("progress", 0))
    total, lexical = len(index.vectors), index.lexical
    weights = _unit_weights(sides["window"], total) if "window" in sides else None
    sparse = _has_sparse(client, windows)  # as the collection was made (a resumed load: by the lengthwise of then)
    owners = np.repeat(np.arange(len(index.doc_ids)), np.diff(index.offsets))
    client.delete(windows, filter=f"id >= {done}")  # a batch written before an interruption recorded it
    for start in range(done, total, batch):
        stop = min(start + batch, total)
        client.insert(windows, [_window_row(index.vectors, owners, weights, row, sparse)
                                for row in range(start, stop)])  # fmt: skip
        write_records(client, records, {"progress": stop})
        if on_progress is not None:
            on_progress(stop, total)
    if "document" in sides:
        _load_documents(client, documents, records, sides["document"], batch)
    if lexical is not None:
        write_records(client, records, _texts(lexical, np.asarray(index.offsets)))
    write_records(client, records, _index_records(index, lexical))
    _settled(client, *[collection for collection, _ in wanted])
    _publish(client, name, windows)
    return MilvusIndex.open(uri, name, method=index.queries.method)


def _create(client: MilvusClient, uri: str, collection: str, schema: Schema, params: IndexParams) -> None:
    """Create `collection` with its indexes, or nothing (a collection made before its index was refused is dropped).

    Raises:
        SettingError: On ``uri``: the Milvus there refused it (a server older than 2.4 has no sparse vectors, which
            BM25 needs: the message says so where the collection has one).
    """
    quiet = logging.getLogger("pymilvus.decorators")  # it logs each failed call with its traceback: the one line
    level = quiet.level  # below says it all
    quiet.setLevel(logging.CRITICAL)
    try:
        client.create_collection(collection, schema=schema, index_params=params)
    except Exception as refused:  # pymilvus's MilvusException, whatever the server said
        if client.has_collection(collection):  # made, its index refused: nothing half-made is left
            client.drop_collection(collection)
        sparse = any(field.name == "bm25" for field in schema.fields)
        hint = ("BM25 needs sparse vectors, Milvus 2.4 or later: use a newer Milvus, or load an index built without "
                "text" if sparse else "check the server's version and logs")  # fmt: skip
        raise SettingError("uri", uri, f"the Milvus there refused the collection {collection} ({refused}); "
                           f"{hint}") from None  # fmt: skip
    finally:
        quiet.setLevel(level)


def _load_documents(client: MilvusClient, collection: str, records: str, side: LexicalIndex, batch: int) -> None:
    """One row per document with its whole-document BM25 weights, inserted in batches after the last one recorded
    (``document_progress``), as the windows are."""
    count = int(side.settings["documents"])
    weights = _unit_weights(side, count)
    done = int(read_records(client, records, ["document_progress"]).get("document_progress", 0))
    client.delete(collection, filter=f"id >= {done}")
    for start in range(done, count, batch):
        stop = min(start + batch, count)
        client.insert(collection, [{"id": doc, "bm25": _terms(weights, doc)} for doc in range(start, stop)])
        write_records(client, records, {"document_progress": stop})


def _terms(weights: csr_matrix | None, row: int) -> dict[int, float]:
    """Row `row`'s nonzero BM25 term weights as a sparse vector (`NO_TERM` alone when it has none)."""
    if weights is None:
        terms: dict[int, float] = {}
    else:
        first, last = weights.indptr[row], weights.indptr[row + 1]
        terms = dict(zip(weights.indices[first:last].tolist(), weights.data[first:last].tolist(), strict=True))
    return {key: value for key, value in terms.items() if value} or {NO_TERM: 1.0}  # Milvus refuses an empty one


def _window_row(vectors: np.ndarray, owners: np.ndarray, weights: csr_matrix | None, row: int, sparse: bool) -> Record:
    out: Record = {"id": row, "doc": int(owners[row]), "dense": np.asarray(vectors[row], dtype=np.float32).tolist()}
    return {**out, "bm25": _terms(weights, row)} if sparse else out


def _index_records(index: LongIndex, lexical: LexicalIndex | BothGranularities | None) -> dict[str, Any]:
    records: dict[str, Any] = {"settings": index.settings, "doc_ids": list(index.doc_ids),
                               "offsets": np.asarray(index.offsets).tolist()}  # fmt: skip
    if lexical is not None:  # the vocabulary of the side a lexical search ranks by (the windows', when both)
        records["lexical"] = {"settings": lexical.settings, **_vocabulary(_window_side(lexical).tokenizer)}
    if isinstance(lexical, BothGranularities):  # whole documents: their own vocabulary
        records["lexical_document"] = _vocabulary(lexical.document.tokenizer)
    return records


def _vocabulary(tokenizer: Bm25Tokenizer) -> Vocabulary:
    """What bm25s's tokenizer needs to give a query the term ids of one BM25 side (`_recorded_tokenizer`)."""
    return {"word_to_stem": tokenizer.word_to_stem, "stem_to_sid": tokenizer.stem_to_sid,
            "word_to_id": tokenizer.word_to_id}  # fmt: skip


def _publish(client: MilvusClient, name: str, windows: str) -> None:
    """Make `name` serve `windows` (its one record, in the collection ``name + SERVED``, rewritten in one upsert),
    keeping the collection it named before (an index opened on it still reads it) and dropping any older load of
    `name`."""
    before = served_collection(client, name)
    if before == windows:
        return
    pointer = name + SERVED
    if not client.has_collection(pointer):
        schema, params = _records_schema(client)
        client.create_collection(pointer, schema=schema, index_params=params)
    ensure_loaded(client, pointer)
    write_records(client, pointer, {"collection": windows})
    kept = {f"{load}{suffix}" for load in (windows, str(before)) for suffix in ("", RECORDS, DOCUMENTS)}
    for collection in client.list_collections():  # ours only:
        if re.fullmatch(rf"{name}__[0-9a-f]{{12}}({RECORDS}|{DOCUMENTS})?", collection) and collection not in kept:
            client.drop_collection(collection)


def _settled(client: MilvusClient, *collections: str) -> None:
    """Flush `collections` and load them again, so the engine serves them from sealed segments with their indexes
    (HNSW, the sparse inverted index), not from the growing segments a load leaves, which it scans: several times
    faster a query, for seconds more at the load (docs/benchmarks.md, `benchmarks/search/milvus_read.py`)."""
    for collection in collections:
        client.flush(collection)
        client.release_collection(collection)
        load_collection(client, collection)
