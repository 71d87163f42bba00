"""Milvus as lengthwise talks to it, for a load (`lengthwise.search.milvus.load`) and for an open index
(`lengthwise.search.milvus.index`): the engine's search limit and its hits as arrays, the connection (embedded Milvus
Lite at a path, a server or cluster at a URL, the same pymilvus calls), the records collection beside each load (JSON
values cut into rows of `CHUNK` characters, each key's count row written after its parts, so a key whose count is
there is whole), loading a collection into the engine's memory, and the collection a served name names (the one
record of the collection ``name + SERVED``)."""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.search.milvus.client import Hits, MilvusClient

SEARCH_LIMIT = 16_384  # Milvus's largest `limit` of one search
LOAD_ATTEMPTS = 3  # loads of a collection before its error is reported (`load_collection`)
CHUNK = 60_000  # characters of the records per row (a VARCHAR holds at most 65,535 bytes; the JSON is ASCII)
PARTS_PER_QUERY = 64  # record parts read by one query
BATCH_CHARS = 4_000_000  # characters of records per upsert
TEXT = "text/"  # the records of the documents' texts: text/0, text/1, …
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,180}$")
RECORDS = "_records"  # suffix of the records collection beside each windows collection
LISTS = 1_024  # IVF_FLAT's lists asked of Milvus Lite 2.x (`dense_index`); 2.5.1 searches an interim index of its
# own whatever lists and probes are asked (docs/engines.md, "No search grouped by document")
READ_ROWS = {"lite": 256, "server": 256, "lite-python": 16_384}  # rows one `id in [...]` query reads, by engine: the
# C++ core's time for it grows faster than the list (2,000 rows: 981 ms in one query, 67 ms in queries of 200, at 1M
# windows), the Python engine walks the whole collection each query (fewer, larger ones)
DOCUMENTS = "_documents"  # suffix of the whole-document BM25 collection beside a windows collection (one row a doc)
STRONG = "Strong"  # the consistency records are read at (`read_records`)
SERVED = "__served"  # suffix of the records collection whose one record names the collection a name serves


def connect(uri: str) -> MilvusClient:
    """A `pymilvus.MilvusClient` on `uri`: a local ``.db`` path (an embedded Milvus Lite, created when new; opened by
    one process at a time, `lengthwise.search.milvus.lite.open_client`) or a server's URL
    (``http://host:19530``: Milvus standalone or a cluster; the same calls either way).

    Raises:
        MissingExtra: pymilvus (or milvus-lite, for a path) is not installed: ``pip install 'lengthwise[milvus]'``.
        SettingError: On ``uri``: nothing answers there; a path that is not a Milvus Lite database or cannot be one,
            or that another process has open.
    """
    from lengthwise.core._optional import require
    from lengthwise.search.milvus.lite import open_client

    embedded = "://" not in uri
    with warnings.catch_warnings():  # milvus-lite 2.5's __init__ imports pkg_resources, which warns of its removal
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
        pymilvus = require("pymilvus", *(["milvus_lite"] if embedded else []), extra="milvus", field="uri", value=uri)
    if embedded:
        return open_client(pymilvus, uri, engine_kind(uri))
    try:  # tried once: each try waits for its timeout
        return pymilvus.MilvusClient(uri)
    except Exception as failed:  # pymilvus raises its own MilvusException, or ConnectionError/OSError
        problem = f"no Milvus could be opened there ({type(failed).__name__}: {failed})"
        raise SettingError("uri", uri, f"{problem}; give a Milvus Lite database (out/milvus.db) or a running "
                           "server's http://host:19530") from None  # fmt: skip


def engine_kind(uri: str) -> str:
    """Which Milvus serves `uri`: ``"server"`` (a URL: Milvus standalone or a cluster), ``"lite"`` (a path served by
    Milvus Lite 2.x, which embeds Milvus's C++ core) or ``"lite-python"`` (a path served by Milvus Lite 3.x, a Python
    engine behind the same API). A load's dense index (`dense_index`) and the rows a read asks for at once
    (`READ_ROWS`) follow it; the calls are the same (docs/engines.md)."""
    if "://" in uri:
        return "server"
    from importlib.metadata import version

    return "lite-python" if int(version("milvus-lite").split(".")[0]) >= 3 else "lite"


def dense_index(kind: str) -> dict[str, Any]:
    """The window vectors' index on an engine of `kind` (`engine_kind`): HNSW where the engine builds it, IVF_FLAT on
    Milvus Lite 2.x, which builds no graph ("local mode only support FLAT IVF_FLAT AUTOINDEX"; FLAT, an exact scan,
    took 150 ms a query at 1M windows, IVF_FLAT 16 ms: `benchmarks/search/milvus_lite25.py`). A search asks for ``ef``
    (HNSW) and ``nprobe`` (IVF) alike; each index reads its own, except that Milvus Lite 2.5.1 searches its interim
    index at probes of its own (`benchmarks/search/milvus_exactness.py`: the same recall at every ``nprobe``)."""
    if kind == "lite":
        return {"index_type": "IVF_FLAT", "metric_type": "IP", "params": {"nlist": LISTS}}
    return {"index_type": "HNSW", "metric_type": "IP", "params": {"M": 16, "efConstruction": 200}}


def check_name(name: str) -> str:
    """`name`, checked as a Milvus collection name."""
    if not NAME.match(name):
        raise SettingError("name", name, "a Milvus collection name: letters, digits and _, not starting with a digit")
    return name


def write_records(client: MilvusClient, collection: str, records: dict[str, Any] | Iterable[tuple[str, Any]]) -> None:
    """Each record as JSON in rows of at most `CHUNK` characters (``key:000000``, …), then ``key`` with its count,
    upserted in batches of about `BATCH_CHARS` characters: a batch's parts before their counts, so a key whose count
    row is there is whole."""
    parts: list[dict[str, object]] = []
    counts: list[dict[str, object]] = []
    size = 0
    for key, value in records.items() if isinstance(records, dict) else records:
        text = json.dumps(value)
        chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]
        parts += [{"key": f"{key}:{n:06d}", "value": part, "unused": [0.0, 0.0]} for n, part in enumerate(chunks)]
        counts.append({"key": key, "value": str(len(chunks)), "unused": [0.0, 0.0]})
        size += len(text)
        if size >= BATCH_CHARS:
            _upsert_records(client, collection, parts, counts)
            parts, counts, size = [], [], 0
    _upsert_records(client, collection, parts, counts)


def _upsert_records(
    client: MilvusClient, collection: str, parts: list[dict[str, object]], counts: list[dict[str, object]]
) -> None:
    for rows in (parts, counts):
        if rows:
            client.upsert(collection, rows)


def read_records(client: MilvusClient, collection: str, keys: Sequence[str]) -> dict[str, Any]:
    """The records `keys` that `write_records` wrote whole (a key without its count row is absent). Read at strong
    consistency: a server reads at bounded staleness by default, and a load's progress or the name it has just
    published, read back at once, was not there yet (a Milvus 2.3.5 standalone server: `open` after a load found no
    index served)."""
    counts = client.query(collection, filter=f"key in {json.dumps(list(keys))}", output_fields=["key", "value"],
                          consistency_level=STRONG)  # fmt: skip
    found: dict[str, Any] = {}
    for row in counts:
        names = [f"{row['key']}:{n:06d}" for n in range(int(row["value"]))]
        parts: dict[str, str] = {}
        for first in range(0, len(names), PARTS_PER_QUERY):  # a few MB a query (parts are up to `CHUNK` characters)
            chunk = names[first : first + PARTS_PER_QUERY]
            rows = client.query(collection, filter=f"key in {json.dumps(chunk)}", output_fields=["key", "value"],
                                limit=len(chunk), consistency_level=STRONG)  # fmt: skip
            parts.update({part["key"]: part["value"] for part in rows})
        found[row["key"]] = json.loads("".join(parts[name] for name in names))
    return found


def ensure_loaded(client: MilvusClient, *collections: str) -> None:
    """Load `collections` into the engine's memory for search and query: Milvus keeps a collection released in a
    process that did not create it (a Milvus Lite database opened again, a server restarted)."""
    for collection in collections:
        if client.get_load_state(collection).get("state") != _loaded_state():
            load_collection(client, collection)


def load_collection(client: MilvusClient, collection: str) -> None:
    """Load `collection`, tried `LOAD_ATTEMPTS` times: Milvus Lite (3.2) can read a segment's index file while its own
    thread is still writing it after a flush ("Failed to read all data for array ... file seems not fully written",
    seen under load in the tests), and a later try reads it whole. A load is idempotent, on a server too."""
    for attempt in range(LOAD_ATTEMPTS):
        try:
            client.load_collection(collection)
            return
        except Exception:  # pymilvus's MilvusException carries the engine's error
            if attempt == LOAD_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * (attempt + 1))


def _loaded_state() -> object:
    from pymilvus.client.types import LoadState

    return LoadState.Loaded


def served_collection(client: MilvusClient, name: str) -> str | None:
    """The windows collection served as `name` (the record ``collection`` of the collection ``name + SERVED``), or
    None."""
    pointer = name + SERVED
    if not client.has_collection(pointer):
        return None
    ensure_loaded(client, pointer)
    found = read_records(client, pointer, ["collection"]).get("collection")
    return None if found is None else str(found)


def hit_arrays(hits: Hits) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, distances) of one query's search hits, in their order: from the arrays pymilvus keeps
    (``ids``, ``distances``) rather than a dict per hit (a thousand hits: 0.03 ms rather than 0.26 here), or from
    the hits themselves where they are plain dicts (a list of them)."""
    ids, distances = getattr(hits, "ids", None), getattr(hits, "distances", None)
    if ids is None or distances is None:
        ids, distances = [hit["id"] for hit in hits], [hit["distance"] for hit in hits]
    return np.asarray(ids, dtype=np.int64).reshape(-1), np.asarray(distances, dtype=np.float32).reshape(-1)
