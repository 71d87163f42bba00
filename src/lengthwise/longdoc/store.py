"""Embeddings of a corpus on disk, shard by shard, so a killed run resumes where it stopped.

A folder holds ``manifest.json`` (the settings that made it) and shards ``{prefix}{n:05d}.npy`` with their ids
``{prefix}{n:05d}.ids.txt`` (one id per line) and, for multi-vector output, ``{prefix}{n:05d}.offsets.npy``. A
shard's ids file is written last, atomically, so a shard either counts whole or not at all. Several workers
write their own prefixes into one folder.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from lengthwise.core.encoder import MultiVectors
from lengthwise.core.results import write_bytes_atomic, write_json_atomic
from lengthwise.longdoc.config import LongDocError

__all__ = ["EmbeddingStore", "corpus_rows", "encode_corpus", "read_embeddings"]

MANIFEST = "manifest.json"


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


class EmbeddingStore:
    """A resumable embedding folder for one set of `settings` (see the module docstring)."""

    def __init__(self, folder: str | Path, settings: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.settings = settings
        manifest = self.folder / MANIFEST
        if manifest.is_file():
            saved = json.loads(manifest.read_text(encoding="utf-8"))["settings"]
            if saved != json.loads(json.dumps(settings)):
                changed = sorted(k for k in set(saved) | set(settings) if saved.get(k) != settings.get(k))
                raise LongDocError(
                    f"--out {self.folder} holds embeddings made with other settings ({', '.join(changed)}); "
                    "pass another --out, or delete the folder to start again"
                )
        else:
            write_json_atomic(manifest, {"format": 1, "settings": settings})

    def shards(self) -> list[Path]:
        """The complete shards (their ids files), in name order."""
        return sorted(self.folder.glob("*.ids.txt"))

    def done_ids(self) -> set[str]:
        """Ids already embedded by any worker."""
        return {line for path in self.shards() for line in path.read_text(encoding="utf-8").splitlines()}

    def next_index(self, prefix: str) -> int:
        return len(list(self.folder.glob(f"{prefix}[0-9][0-9][0-9][0-9][0-9].ids.txt")))

    def write(self, prefix: str, ids: list[str], embeddings: np.ndarray | MultiVectors) -> Path:
        """Write one shard: vectors (n, D), or all windows (W, D) with offsets (n + 1,); ids last."""
        stem = self.folder / f"{prefix}{self.next_index(prefix):05d}"
        if isinstance(embeddings, MultiVectors):
            write_bytes_atomic(stem.with_suffix(".npy"), _npy_bytes(embeddings.vectors))
            write_bytes_atomic(stem.with_suffix(".offsets.npy"), _npy_bytes(embeddings.offsets))
        else:
            write_bytes_atomic(stem.with_suffix(".npy"), _npy_bytes(embeddings))
        return write_bytes_atomic(stem.with_suffix(".ids.txt"), "".join(f"{i}\n" for i in ids).encode("utf-8"))


def _shard_arrays(folder: Path) -> Iterator[tuple[list[str], np.ndarray, np.ndarray | None]]:
    for ids_path in sorted(folder.glob("*.ids.txt")):
        stem = str(ids_path)[: -len(".ids.txt")]
        ids = ids_path.read_text(encoding="utf-8").splitlines()
        offsets_path = Path(f"{stem}.offsets.npy")
        offsets = np.load(offsets_path) if offsets_path.is_file() else None
        yield ids, np.load(f"{stem}.npy"), offsets


def read_embeddings(folder: str | Path) -> tuple[list[str], np.ndarray | MultiVectors]:
    """Every id and its embedding from a folder written by `lengthwise encode` (shards concatenated)."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        raise LongDocError(f"{folder}: no {MANIFEST}; is it a folder written by `lengthwise encode`?")
    ids: list[str] = []
    arrays: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    multi = False
    for shard_ids, array, offsets in _shard_arrays(folder):
        ids += shard_ids
        arrays.append(array)
        multi = offsets is not None
        if offsets is not None:
            counts.append(np.diff(offsets))
    if not arrays:
        raise LongDocError(f"{folder}: no complete shard yet")
    if multi:
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
        return ids, MultiVectors(np.concatenate(arrays), offsets)
    return ids, np.concatenate(arrays)


def corpus_rows(path: str | Path) -> Iterator[tuple[str, str]]:
    """(id, text) of each document of a JSONL corpus (``_id``/``id``, ``text``, optional ``title``) or a text
    file (one document per line, id = line number), read lazily. A row without text raises naming file:line."""
    from lengthwise.core.textio import checked_text, jsonl_objects, open_text

    path = Path(path)
    if not path.is_file():
        raise LongDocError(f"--data {path}: no such file; pass a corpus.jsonl (or .txt, one document per line)")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        for line_no, row in jsonl_objects(path, "a JSON object with a 'text' field"):
            text = checked_text(path, line_no, row.get("text"), "'text'")
            title = str(row.get("title") or "").strip()
            yield str(row.get("_id", row.get("id", line_no))), f"{title} {text}" if title else text
        return
    with open_text(path) as handle:
        for line_no, line in handle.lines():
            yield str(line_no), checked_text(path, line_no, line, "the line")


def encode_corpus(
    encoder: Any,
    path: str | Path,
    store: EmbeddingStore,
    *,
    shard_docs: int = 1000,
    batch_size: int = 32,
    worker: tuple[int, int] = (0, 1),
    show_progress: bool = False,
) -> int:
    """Embed the documents of `path` not yet in `store` with a `LongEncoder`, `shard_docs` per shard.

    `worker` = (k, n): this process takes documents k, k + n, k + 2n, … (by position in the file). Multi-vector
    strategies store every window. Returns the number of documents embedded in this call.
    """
    from tqdm.auto import tqdm

    done = store.done_ids()
    prefix = f"w{worker[0]}-"
    written = 0
    pending: list[tuple[str, str]] = []

    def flush() -> None:
        ids = [doc_id for doc_id, _ in pending]
        texts = [text for _, text in pending]
        if encoder.is_multi_vector:
            embeddings: np.ndarray | MultiVectors = encoder.encode_documents_multi(texts, batch_size=batch_size)
        else:
            embeddings = encoder.encode_documents(texts, batch_size=batch_size)
        store.write(prefix, ids, embeddings)
        pending.clear()

    with tqdm(unit="doc", disable=not show_progress, desc="encode") as bar:
        for position, (doc_id, text) in enumerate(corpus_rows(path)):
            if position % worker[1] != worker[0] or doc_id in done:
                continue
            pending.append((doc_id, text))
            if len(pending) >= shard_docs:
                written += len(pending)
                flush()
                bar.update(shard_docs)
        if pending:
            written += len(pending)
            bar.update(len(pending))
            flush()
    return written
