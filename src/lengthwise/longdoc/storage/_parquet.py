"""Window rows as Parquet: one row per window vector that `lengthwise encode --format parquet` stores (the default of
``--runner ray``).

Columns (`SCHEMA`): ``doc_id`` (string), ``window`` (int32, 0, 1, … within the document, in the order of the
``.npy`` shard), ``start`` and ``end`` (int32, the window's span in the document's content tokens, special tokens
and prompt excluded, as `LongEncoder.spans` cuts them) and ``vector`` (fixed-size list of float32). A single-vector
strategy gives one row per document: window 0, the span its vector reads (the whole document, or the kept head for
``truncate``). Each shard's rows are one part, ``OUT/parquet/part-{shard}.parquet``, written atomically and named
in the shard's record, so the folder reads as one table: ``pyarrow.parquet.read_table(OUT / "parquet")``.

pyarrow is imported inside the functions: it comes with Ray Data or the ``lengthwise[parquet]`` extra, and
`require_pyarrow` turns its absence into a one-line install hint before any compute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.core.shards import parquet_part

if TYPE_CHECKING:  # imported where used: the shard store imports this module, and Ray's read tasks the store
    from lengthwise.core.encoder import MultiVectors

__all__ = [
    "COLUMNS",
    "FORMATS",
    "parquet_bytes",
    "require_pyarrow",
    "shard_part",
    "window_spans",
    "window_table",
]

COLUMNS = ("doc_id", "window", "start", "end", "vector")
FORMATS = ("npy", "parquet")  # what `encode` writes: the shards alone, or the shards and their window rows


def require_pyarrow() -> None:
    """Raise a `MissingExtra` (a `SettingError`) on ``format`` naming the extra when pyarrow is missing."""
    from lengthwise.core._optional import require

    require("pyarrow", "pyarrow.parquet", extra="parquet", field="format", value="parquet")


def shard_part(
    encoder: Any, ids: Sequence[str], texts: Sequence[str], embeddings: np.ndarray | MultiVectors
) -> Callable[[str], dict[str, bytes]]:
    """The `EmbeddingStore.write` ``extra`` that adds a shard's window rows: its stem name → {part path: bytes}."""
    table = window_table(ids, window_spans(encoder, texts), embeddings)

    def part(stem: str) -> dict[str, bytes]:
        return {parquet_part(Path("."), stem).as_posix(): parquet_bytes(table)}

    return part


def window_spans(encoder: Any, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """Each text's window spans in content tokens, as the `LongEncoder` cuts them; a single-vector strategy
    gives one span, from its first window's start to its last window's end."""
    ids = encoder.tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    spans = [encoder.spans(doc, "document") for doc in ids]
    if encoder.is_multi_vector:
        return spans
    return [[(min(s for s, _ in doc), max(e for _, e in doc))] for doc in spans]


def window_table(
    ids: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]], embeddings: np.ndarray | MultiVectors
) -> Any:
    """A `pyarrow.Table` of the window rows (`COLUMNS`) of one shard: `embeddings` as the shard's ``.npy``
    holds them (vectors (n, D), or every window (W, D) with offsets). Raises `RuntimeError` (a bug, not an input's
    fault) when the window counts and the offsets disagree."""
    import pyarrow as pa

    from lengthwise.core.encoder import MultiVectors

    vectors = embeddings.vectors if isinstance(embeddings, MultiVectors) else embeddings
    counts = np.diff(embeddings.offsets) if isinstance(embeddings, MultiVectors) else np.ones(len(ids), np.int64)
    if [len(doc) for doc in spans] != counts.tolist():
        raise RuntimeError("the window spans and the encoded windows disagree; this is a bug, please report it")
    flat = [span for doc in spans for span in doc]
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    columns = {
        "doc_id": pa.array(np.repeat(np.asarray(ids, dtype=object), counts), pa.string()),
        "window": pa.array(np.concatenate([np.arange(c) for c in counts]) if len(counts) else [], pa.int32()),
        "start": pa.array([s for s, _ in flat], pa.int32()),
        "end": pa.array([e for _, e in flat], pa.int32()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1]),
    }
    return pa.table(columns)


def parquet_bytes(table: Any) -> bytes:
    """`table` as the bytes of one Parquet file (zstd), to be written atomically by the caller."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())
