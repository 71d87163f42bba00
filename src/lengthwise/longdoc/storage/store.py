"""Embeddings of a corpus on disk, shard by shard, so a killed run resumes where it stopped.

A folder holds ``manifest.json`` (the settings that made it) and shards ``{prefix}{n:05d}.npy`` with their ids
``{prefix}{n:05d}.ids.txt`` (one JSON string per line, so that any id round-trips; shards written before that
hold one raw id per line) and, for multi-vector output, ``{prefix}{n:05d}.offsets.npy``. Each
shard's record, ``{prefix}{n:05d}.shard.json`` (the byte size and sha256 of each of its files, and its id count), is
written last and atomically: a shard counts only when its record is there and every file matches it. A resumed run
re-embeds the documents of a damaged or missing shard; a reader refuses one. Several workers write their own
prefixes into one folder, so no two processes ever write the same file. A shard may carry further files named in
its record (the Parquet window rows, ``parquet/part-{prefix}{n:05d}.parquet``): they are checked and removed with
it.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# Deprecated here (0.2; removed in 0.3): the readers moved to the hall, `lengthwise.core.shards` and
# `lengthwise.core.corpus`, shared with the search room; read there.
from lengthwise.core.corpus import TEXTS, check_corpus, corpus_digests, corpus_rows, text_digest, texts_sha256  # noqa: F401
from lengthwise.core.errors import LongDocError
from lengthwise.core.results import is_atomic_temp, write_bytes_atomic, write_json_atomic
from lengthwise.core.shards import (  # noqa: F401
    MANIFEST,
    PARQUET,
    RECORD,
    Shard,
    current_settings,
    iter_shards,
    parquet_part,
    read_embeddings,
    read_manifest,
    shards,
)
from lengthwise.longdoc.storage._parquet import shard_part

if TYPE_CHECKING:  # imported where used: Ray Data's read tasks import this module and need no torch
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.core.progress import ProgressMode

__all__ = ["EmbeddingStore", "encode_corpus"]


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _digest(data: bytes) -> dict[str, Any]:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


class EmbeddingStore:
    """A resumable embedding folder for one set of `settings` (see the module docstring).

    Opening one checks the folder and writes nothing: ``manifest.json`` is written with the first shard (or the
    first repair), so a run refused before it (a bad setting, a model that does not load) leaves no trace, and a
    folder holding no shard is new whatever its manifest says. `finish` records the digest of the texts embedded.
    """

    def __init__(self, folder: str | Path, settings: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.settings = {key: value for key, value in settings.items() if key != TEXTS}
        self._started = False
        if (self.folder / MANIFEST).is_file() and self.shards():
            saved = {k: v for k, v in read_manifest(self.folder)["settings"].items() if k != TEXTS}
            wanted = json.loads(json.dumps(self.settings))
            if saved != wanted:
                changed = sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
                raise LongDocError(
                    None,
                    None,
                    f"{self.folder} holds embeddings made with other settings ({', '.join(changed)}); "
                    "write to another folder, or delete it to start again",
                )
            return
        # a manifest's temporary file is another worker of this encode starting the folder, not a stranger's file
        names = sorted(p.name for p in self.folder.iterdir()) if self.folder.is_dir() else []
        files = [name for name in names if not is_atomic_temp(name, MANIFEST)]
        if files and not (self.folder / MANIFEST).is_file():
            raise LongDocError(
                None,
                None,
                f"{self.folder} holds files that are not embeddings written by lengthwise ({files[0]}); pass a "
                "new or empty directory, or one that `lengthwise encode` wrote",
            )

    def start(self) -> None:
        """Make the folder and write its manifest (without a texts digest: the shards are about to change); once.
        Whatever a writer keeps beside the shards (a token folder's codec) is written after it."""
        if not self._started:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.folder / MANIFEST, {"format": 2, "settings": self.settings})
            self._started = True

    def shards(self) -> list[Shard]:
        """Every shard in the folder, whole or not, in name order."""
        return shards(self.folder) if self.folder.is_dir() else []

    def done_ids(self) -> set[str]:
        """Ids of the whole shards (sizes checked; nothing is removed, so it is safe while other workers write)."""
        return {doc_id for shard in self.shards() if shard.problem(hashes=False) is None for doc_id in shard.ids()}

    def repair(self, corpus: Mapping[str, int] | None = None) -> tuple[set[str], list[str]]:
        """(ids of the whole shards, one line per shard removed): a resumed run re-embeds the documents of every
        removed shard. A shard is removed when damaged or unfinished, or, given the `corpus` (id → `text_digest`),
        when one of its documents has another text there or is gone from it."""
        done: set[str] = set()
        removed: list[str] = []
        for shard in self.shards():
            problem = shard.problem()
            if problem is None and corpus is not None:
                problem = shard.stale(corpus)
            if problem is None:
                done.update(shard.ids())
                continue
            self.start()  # the manifest loses its texts digest before any shard goes
            removed.append(f"{shard.stem.name}: {problem}; its documents are embedded again")
            for path in shard.files:
                path.unlink()
        parts = self.folder / PARQUET
        kept = {parquet_part(self.folder, shard.stem.name) for shard in self.shards()}
        for path in sorted(parts.glob("*.parquet")) if parts.is_dir() else []:
            if path not in kept:  # a part whose shard is gone: its rows would be read twice after the rerun
                removed.append(f"{PARQUET}/{path.name}: no shard of its own; removed")
                path.unlink()
        return done, removed

    def finish(self) -> str | None:
        """Record in the manifest the digest of every (id, text) the whole shards hold (`texts_sha256`), so that an
        index built from the folder can tell whether a corpus is the one embedded; None (nothing recorded) when a
        shard predates the text digests. Call it once every worker is done."""
        digests: dict[str, int] = {}
        for shard in self.shards():
            shard_digests = shard.digests() if shard.problem(hashes=False) is None else None
            if shard_digests is None:
                return None
            digests.update(zip(shard.ids(), shard_digests, strict=True))
        if not digests:
            return None
        total = texts_sha256(digests)
        write_json_atomic(self.folder / MANIFEST, {"format": 2, "settings": {**self.settings, TEXTS: total}})
        return total

    def next_index(self, prefix: str) -> int:
        """One past the highest shard number of `prefix` (numbers freed by a repair are not reused)."""
        names = [shard.stem.name for shard in self.shards()]
        numbers = [
            int(name[len(prefix) :]) for name in names if name.startswith(prefix) and name[len(prefix) :].isdigit()
        ]
        return max(numbers, default=-1) + 1

    def write(
        self,
        prefix: str,
        ids: list[str],
        embeddings: np.ndarray | MultiVectors,
        *,
        number: int | None = None,
        extra: Callable[[str], dict[str, bytes]] | None = None,
        digests: list[int] | None = None,
    ) -> Path:
        """Write one shard: vectors (n, D), or all windows (W, D) with offsets (n + 1,); ids; its record last.

        `number`: the shard's number (default: the next free one of `prefix`); a writer that may be retried gives
        a fixed one, so that a retry rewrites the same files. `extra(stem name)`: further files (paths relative to
        the folder → bytes), written before the record and named in it. `digests`: each document's
        `text_digest`, kept in the record (a resumed run re-embeds a document whose text changed).
        """
        from lengthwise.core.encoder import MultiVectors

        self.start()
        stem = self.folder / f"{prefix}{self.next_index(prefix) if number is None else number:05d}"
        files: dict[str, bytes] = {}
        if isinstance(embeddings, MultiVectors):
            files[f"{stem.name}.npy"] = _npy_bytes(embeddings.vectors)
            files[f"{stem.name}.offsets.npy"] = _npy_bytes(embeddings.offsets)
        else:
            files[f"{stem.name}.npy"] = _npy_bytes(embeddings)
        files[f"{stem.name}.ids.txt"] = "".join(json.dumps(i) + "\n" for i in ids).encode("ascii")  # any id
        files.update(extra(stem.name) if extra is not None else {})
        for name, data in files.items():
            write_bytes_atomic(self.folder / name, data)
        record: dict[str, Any] = {"ids": len(ids), "id_format": "json",
                                  "files": {name: _digest(data) for name, data in files.items()}}  # fmt: skip
        if digests is not None:
            record["texts"] = [int(digest) for digest in digests]
        return write_json_atomic(Path(f"{stem}{RECORD}"), record)


def encode_corpus(
    encoder: Any,
    path: str | Path,
    store: EmbeddingStore,
    *,
    shard_docs: int = 1000,
    batch_size: int = 32,
    worker: tuple[int, int] = (0, 1),
    show_progress: bool | ProgressMode = False,
    repair: bool = True,
    parquet: bool = False,
    on_note: Callable[[str], None] | None = None,
    progress_interval: float | None = None,
) -> int:
    """Embed the documents of `path` not yet in `store` with a `LongEncoder`, `shard_docs` per shard.

    `worker` = (k, n): this process takes documents k, k + n, k + 2n, … (by position in the file). Multi-vector
    strategies store every window. With `repair`, a damaged or unfinished shard is removed first and its documents
    are embedded again (`on_note` is told which); workers sharing a folder pass False after one `store.repair()`.
    With `parquet`, each shard's window rows are written too (`lengthwise.longdoc.storage._parquet`) and named in its
    record. The corpus is checked first (`check_corpus`). Returns the number of documents embedded now.

    `show_progress`: True or ``"bar"``, tqdm's bar; ``"lines"``, a plain line on stderr at most every
    `progress_interval` seconds (`lengthwise.core.progress.ProgressLines`; None: ``LENGTHWISE_PROGRESS_INTERVAL``, else
    30): the documents done of this worker's, the windows embedded, the rate and the time left.
    """
    from lengthwise.core.progress import progress_bar

    corpus = corpus_digests(path)
    if repair:
        done, removed = store.repair(corpus)
        for line in removed:
            if on_note is not None:
                on_note(line)
    else:
        done = store.done_ids()
    prefix = f"w{worker[0]}-"
    written = 0
    pending: list[tuple[str, str]] = []
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lengthwise-shards")  # off the encode's path
    writing: list[Future] = []  # at most one shard being written while the next is embedded

    def flush(embedded: Callable[[], None]) -> None:
        ids = [doc_id for doc_id, _ in pending]
        texts = [text for _, text in pending]
        if encoder.is_multi_vector:
            embeddings: np.ndarray | MultiVectors = encoder.encode_documents_multi(
                texts, batch_size=batch_size, on_document=embedded
            )
        else:
            embeddings = encoder.encode_documents(texts, batch_size=batch_size, on_document=embedded)
        while writing:
            writing.pop().result()  # the previous shard is on disk (its error raised here) before the next starts
        extra = shard_part(encoder, ids, texts, embeddings) if parquet else None  # tokenizes: on this thread
        if extra is None and hasattr(encoder, "shard_extra"):  # an encoder's own files (a token index's spans)
            extra = encoder.shard_extra()
        writing.append(writer.submit(store.write, prefix, ids, embeddings, extra=extra,
                                     digests=[corpus[doc_id] for doc_id in ids]))  # fmt: skip
        pending.clear()

    mine = [doc_id for position, doc_id in enumerate(corpus) if position % worker[1] == worker[0]]
    mode = "bar" if show_progress is True else show_progress or None
    desc = "encode" if worker[1] == 1 else f"encode (worker {worker[0] + 1} of {worker[1]})"
    with writer, progress_bar(desc, len(mine), mode, initial=sum(doc_id in done for doc_id in mine),
                              interval=progress_interval) as bar:  # fmt: skip
        embedded = _counter(bar, encoder)  # the bar counts documents embedded (or a block's done share), not read
        for position, (doc_id, text) in enumerate(corpus_rows(path)):
            if position % worker[1] != worker[0] or doc_id in done:
                continue
            pending.append((doc_id, text))
            if len(pending) >= shard_docs:
                written += len(pending)
                flush(embedded)
        if pending:
            written += len(pending)
            flush(embedded)
        if hasattr(encoder, "on_forward"):
            encoder.on_forward = None  # the bar it moved closes here
        for future in writing:
            future.result()
    if repair:  # the whole job in this process: record the texts digest
        store.finish()
    return written


def _counter(bar: Any, encoder: Any) -> Callable[[], None]:
    """The `on_document` of an encode: one more document on `bar` as each comes out of `encoder`, with the windows
    (or a token encoder's tokens) it has run through its model since (its ``stats``, when it keeps them). An encoder
    that says how far it is into a block of documents (`LongEncoder.block_progress`, told after each batch through
    its ``on_forward``) moves the bar with every batch meanwhile, by the documents whose share of the block's
    windows is done: a block of long documents takes minutes on a CPU and gives its documents out only at its end."""
    stats = getattr(encoder, "stats", None)
    unit = next((name for name in ("windows", "tokens") if isinstance(stats, dict) and name in stats), None)
    keeps = isinstance(stats, dict) and "forwarded_windows" in stats
    key = "forwarded_windows" if unit == "windows" and keeps else unit  # counted during a block too
    first = stats[key] if stats is not None and key is not None else 0
    start, out = bar.n, [0]  # the bar's count before, and the documents out of the encoder since

    def show(done: float) -> None:
        if stats is not None and key is not None:
            bar.set_postfix_str(f"{stats[key] - first:,} {unit}", refresh=False)
        if (target := start + int(done)) > bar.n:  # never back: a block's estimate gives way to its documents
            bar.update(target - bar.n)

    def embedded() -> None:
        out[0] += 1
        show(out[0])

    if callable(getattr(encoder, "block_progress", None)) and hasattr(encoder, "on_forward"):
        encoder.on_forward = lambda: show(out[0] + encoder.block_progress())
    return embedded
