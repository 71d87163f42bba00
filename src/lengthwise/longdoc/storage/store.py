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
import re
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.core.results import is_atomic_temp, write_bytes_atomic, write_json_atomic
from lengthwise.longdoc.config import LongDocError, renamed_settings
from lengthwise.longdoc.storage._parquet import PARQUET, parquet_part, shard_part

if TYPE_CHECKING:  # imported where used: Ray Data's read tasks import this module and need no torch
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.core.progress import ProgressMode

__all__ = [
    "EmbeddingStore",
    "Shard",
    "check_corpus",
    "corpus_digests",
    "corpus_rows",
    "encode_corpus",
    "iter_shards",
    "read_embeddings",
    "text_digest",
    "texts_sha256",
]

MANIFEST = "manifest.json"
RECORD = ".shard.json"
REPAIR = "rerun `lengthwise encode` with the same settings to repair it"
TEXTS = "texts_sha256"  # the manifest's digest of every (id, text) the shards hold: the folder's, not a setting
SHARD_NAME = re.compile(r"w\d+-\d{5,}")  # a shard's stem; any other file in the folder is not the store's
RENAMED_SETTINGS = {"engine": "runner"}  # a manifest key → its name now (`engine` until 0.2: local or ray)


def text_digest(text: str) -> int:
    """A 63-bit digest of a document's text: each shard records its documents', so a resumed run finds the documents
    whose text changed, and the Ray runner checks that each actor got the text the plan read."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def texts_sha256(digests: Mapping[str, int]) -> str:
    """One sha256 over every (id, text digest) pair, in id order: the same for the same documents, however they
    are split into shards or ordered in the corpus."""
    hasher = hashlib.sha256()
    for doc_id in sorted(digests):
        hasher.update(f"{json.dumps(doc_id)}\t{digests[doc_id]}\n".encode())
    return hasher.hexdigest()


def read_manifest(folder: Path) -> dict[str, Any]:
    """The ``manifest.json`` of a folder `lengthwise encode` wrote, its settings under today's names: the one reader
    of it (a resumed encode, an index build). `LongDocError` naming the file when it is missing, unreadable, or not
    JSON with settings."""
    path = folder / MANIFEST
    if not path.is_file():
        raise LongDocError(None, None, f"{folder}: no {MANIFEST}; pass a folder written by `lengthwise encode`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        problem = None if isinstance(manifest, dict) and isinstance(manifest.get("settings"), dict) else "no settings"
    except (OSError, UnicodeDecodeError, ValueError) as error:
        problem = str(error)
    if problem is not None:
        raise LongDocError(None, None, f"{path}: unreadable ({problem}); encode into a new folder with `lengthwise "
                           "encode`")  # fmt: skip
    return {**manifest, "settings": current_settings(manifest["settings"])}


def current_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A manifest's settings under today's names (`RENAMED_SETTINGS`), so that a folder written before a rename
    resumes, and is indexed, as one written now."""
    current = {RENAMED_SETTINGS.get(key, key): value for key, value in settings.items()}
    if isinstance(current.get("long"), Mapping):  # the long-document config, its own renames (`top_k` in 0.1)
        current["long"] = renamed_settings(current["long"])
    return current


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _digest(data: bytes) -> dict[str, Any]:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _file_digest(path: Path) -> dict[str, Any]:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return {"bytes": path.stat().st_size, "sha256": hasher.hexdigest()}


@dataclass(frozen=True)
class Shard:
    """One shard on disk: its stem (``folder/w0-00003``) and its record, if any."""

    stem: Path
    record: dict[str, Any] | None

    @property
    def files(self) -> list[Path]:
        """Every file of the shard that exists (data, offsets, ids, its Parquet part, record)."""
        suffixes = (".npy", ".offsets.npy", ".ids.txt", RECORD)
        paths = [Path(f"{self.stem}{suffix}") for suffix in suffixes]
        paths.insert(-1, parquet_part(self.stem.parent, self.stem.name))
        return [path for path in paths if path.exists()]

    def problem(self, *, hashes: bool = True) -> str | None:
        """Why the shard cannot be used (no record, a file missing, truncated or changed, its ids not the count its
        record says), or None when it is whole. With `hashes` False the sizes are compared, not the sha256s."""
        if self.record is None:
            return "no shard record (an interrupted write)"
        for name, expected in self.record["files"].items():
            path = self.stem.parent / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != expected["bytes"]:
                return f"{name} has {path.stat().st_size} bytes, its record says {expected['bytes']}"
            if hashes and _file_digest(path)["sha256"] != expected["sha256"]:
                return f"{name} does not match its sha256"
        return self.id_count_problem()

    def ids(self) -> list[str]:
        """The shard's document ids, in order (`LongDocError` naming the file when one is not a JSON string)."""
        path = Path(f"{self.stem}.ids.txt")
        text = path.read_text(encoding="utf-8")
        if (self.record or {}).get("id_format") != "json":
            return text.splitlines()  # written before ids were JSON: raw lines
        try:
            ids = [json.loads(line) for line in text.split("\n") if line]
        except ValueError:
            ids = [None]
        if not all(isinstance(i, str) for i in ids):
            raise LongDocError(None, None, f"{path}: a line is not a JSON string; {REPAIR}")
        return ids

    def id_count_problem(self) -> str | None:
        """Why the shard's ids disagree with its record's count (a raw id holding a line break reads as two), or
        None."""
        try:
            found = len(self.ids())
        except LongDocError:
            return f"{self.stem.name}.ids.txt holds a line that is not a JSON string"
        expected = (self.record or {}).get("ids", found)
        return None if found == expected else f"{self.stem.name}.ids.txt holds {found} ids, its record says {expected}"

    def digests(self) -> list[int] | None:
        """The text digest of each document (`text_digest`), in id order; None for a shard written before they were
        recorded."""
        return None if self.record is None else self.record.get("texts")

    def stale(self, corpus: Mapping[str, int]) -> str | None:
        """Why the shard's vectors no longer stand for `corpus` (id → `text_digest`): documents whose text changed
        or that are gone from it; None when every one is as embedded (or the shard recorded no digests)."""
        digests = self.digests()
        if digests is None:
            return None
        ids = self.ids()
        if len(digests) != len(ids):
            return f"its record holds {len(digests)} text digests for {len(ids)} ids"
        changed = [doc_id for doc_id, digest in zip(ids, digests, strict=True) if corpus.get(doc_id) != digest]
        if not changed:
            return None
        gone = sum(doc_id not in corpus for doc_id in changed)
        parts = [f"{len(changed) - gone} of its {len(ids)} documents have another text in the corpus now"] * (
            gone < len(changed)
        ) + [f"{gone} of its {len(ids)} documents are gone from the corpus"] * (gone > 0)
        return f"{' and '.join(parts)} (first: {changed[0]!r})"


def _shards(folder: Path) -> list[Shard]:
    """Every shard stem in `folder` (from any of its files), with its record when there is one, in name order. Only
    names of the shard pattern (``w{k}-{n:05d}``) count: a user's ``labels.npy`` beside them is not a shard."""
    stems: set[str] = set()
    for path in folder.iterdir():
        name = path.name
        for suffix in (RECORD, ".ids.txt", ".offsets.npy", ".npy"):
            if name.endswith(suffix) and SHARD_NAME.fullmatch(name[: -len(suffix)]):
                stems.add(name[: -len(suffix)])
                break
    shards = []
    for stem in sorted(stems):
        record_path = folder / f"{stem}{RECORD}"
        try:
            record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else None
        except (OSError, ValueError):
            record = None
        shards.append(Shard(folder / stem, record))
    return shards


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

    def _start(self) -> None:
        """Make the folder and write its manifest (without a texts digest: the shards are about to change)."""
        if not self._started:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.folder / MANIFEST, {"format": 2, "settings": self.settings})
            self._started = True

    def shards(self) -> list[Shard]:
        """Every shard in the folder, whole or not, in name order."""
        return _shards(self.folder) if self.folder.is_dir() else []

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
            self._start()  # the manifest loses its texts digest before any shard goes
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

        self._start()
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


def iter_shards(folder: str | Path, *, mmap: bool = False) -> Iterator[tuple[list[str], np.ndarray, np.ndarray | None]]:
    """(ids, vectors, window offsets or None) of each complete shard of `folder`, in order, each checked first
    (size and sha256 of its files; a damaged one raises `LongDocError` naming it). With `mmap`, the vectors are
    memory-mapped, not read: a corpus larger than memory streams shard by shard. A shard whose arrays disagree
    (offsets, ids, vectors) or whose dimension differs from the first shard's raises `LongDocError` naming it."""
    dim = None
    for shard in _shards(Path(folder)):
        problem = shard.problem()
        where = shard.stem.parent / f"{shard.stem.name}.npy"
        if problem is not None:
            raise LongDocError(None, None, f"{where}: damaged or incomplete shard ({problem}); {REPAIR}")
        offsets_path = Path(f"{shard.stem}.offsets.npy")
        offsets = np.load(offsets_path, allow_pickle=False) if offsets_path.is_file() else None
        ids, array = shard.ids(), np.load(where, allow_pickle=False, mmap_mode="r" if mmap else None)
        if problem := _layout_problem(ids, array, offsets):
            raise LongDocError(None, None, f"{where}: {problem}; encode into a new folder with `lengthwise encode`")
        dim = array.shape[1] if dim is None else dim
        if array.shape[1] != dim:
            raise LongDocError(
                None,
                None,
                f"{where}: {array.shape[1]} dimensions, the folder's first shard has {dim} (shards of "
                "two models); encode into a new folder with `lengthwise encode`",
            )
        yield ids, array, offsets


def _layout_problem(ids: list[str], array: np.ndarray, offsets: np.ndarray | None) -> str | None:
    """Why a shard's vectors, ids and window offsets do not fit together, or None."""
    if array.ndim != 2:
        return f"vectors of shape {array.shape}, not (rows, dimensions)"
    if offsets is None:
        return None if len(array) == len(ids) else f"{len(array)} vectors for {len(ids)} ids"
    if offsets.ndim != 1 or not np.issubdtype(offsets.dtype, np.integer) or len(offsets) != len(ids) + 1:
        return f"window offsets of shape {offsets.shape} for {len(ids)} ids"
    if offsets[0] != 0 or offsets[-1] != len(array) or (np.diff(offsets) < 0).any():
        return f"window offsets that do not run from 0 to its {len(array)} windows"
    return None


def read_embeddings(folder: str | Path) -> tuple[list[str], np.ndarray | MultiVectors]:
    """Every id and its embedding from a folder written by `lengthwise encode` (shards concatenated).

    Raises `LongDocError` naming the file for a damaged or incomplete shard (size or sha256 not as recorded).
    """
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        raise LongDocError(None, None, f"{folder}: no {MANIFEST}; is it a folder written by `lengthwise encode`?")
    ids: list[str] = []
    arrays: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    multi = False
    for shard_ids, array, offsets in iter_shards(folder):
        ids += shard_ids
        arrays.append(array)
        multi = offsets is not None
        if offsets is not None:
            counts.append(np.diff(offsets))
    if not arrays:
        raise LongDocError(None, None, f"{folder}: no complete shard yet")
    if multi:
        from lengthwise.core.encoder import MultiVectors

        offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
        return ids, MultiVectors(np.concatenate(arrays), offsets)
    return ids, np.concatenate(arrays)


def _corpus_lines(path: str | Path) -> Iterator[tuple[int, str, str]]:
    """(line, id, text) of each document of a JSONL corpus or a text file (see `corpus_rows`)."""
    from lengthwise.core._textio import checked_text, jsonl_objects, open_text, row_id

    path = Path(path)
    if not path.is_file():
        raise LongDocError(None, None, f"{path}: no such file; pass a corpus.jsonl (or .txt, one document per line)")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        for line_no, row in jsonl_objects(path, "a JSON object with a 'text' field"):
            text = checked_text(path, line_no, row.get("text"), "'text'")
            title, doc_id = str(row.get("title") or "").strip(), row_id(path, line_no, row, line_no)
            if not doc_id.strip():  # a hit under "" (or spaces) cannot be told from no id at all
                raise LongDocError(None, None, f"{path}:{line_no}: an empty _id; give every document its own id")
            yield line_no, doc_id, f"{title} {text}" if title else text
        return
    with open_text(path) as handle:
        for line_no, line in handle.lines():
            yield line_no, str(line_no), checked_text(path, line_no, line, "the line")


def corpus_rows(path: str | Path) -> Iterator[tuple[str, str]]:
    """(id, text) of each document of a JSONL corpus (``_id``/``id``, ``text``, optional ``title``) or a text
    file (one document per line, id = line number), read lazily. A row without text raises naming file:line."""
    for _, doc_id, text in _corpus_lines(path):
        yield doc_id, text


def corpus_digests(path: str | Path) -> dict[str, int]:
    """Read the whole corpus once before any compute: every row must have text and a unique id. Returns each id's
    `text_digest`, in corpus order.

    Raises `LongDocError` naming the file and the line of a second occurrence of an id: two vectors under one id
    could not be told apart by a search or an evaluation.
    """
    digests: dict[str, int] = {}
    for line_no, doc_id, text in _corpus_lines(path):
        if doc_id in digests:
            first = next(n for n, other, _ in _corpus_lines(path) if other == doc_id)
            raise LongDocError(
                None,
                None,
                f"{path}:{line_no}: duplicate _id {doc_id!r} (first at line {first}); give every document its own id",
            )
        digests[doc_id] = text_digest(text)
    return digests


def check_corpus(path: str | Path) -> int:
    """`corpus_digests`' checks; returns the number of documents."""
    return len(corpus_digests(path))


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
        writing.append(writer.submit(store.write, prefix, ids, embeddings, extra=extra,
                                     digests=[corpus[doc_id] for doc_id in ids]))  # fmt: skip
        pending.clear()

    mine = [doc_id for position, doc_id in enumerate(corpus) if position % worker[1] == worker[0]]
    mode = "bar" if show_progress is True else show_progress or None
    desc = "encode" if worker[1] == 1 else f"encode (worker {worker[0] + 1} of {worker[1]})"
    with writer, progress_bar(desc, len(mine), mode, initial=sum(doc_id in done for doc_id in mine),
                              interval=progress_interval) as bar:  # fmt: skip
        embedded = _counter(bar, encoder)  # the bar counts documents embedded, not read
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
        for future in writing:
            future.result()
    if repair:  # the whole job in this process: record the texts digest
        store.finish()
    return written


def _counter(bar: Any, encoder: Any) -> Callable[[], None]:
    """The `on_document` of an encode: one more document on `bar`, with the windows `encoder` has embedded since
    (its ``stats``, when it keeps them)."""
    stats = getattr(encoder, "stats", None)
    stats = stats if isinstance(stats, dict) and "windows" in stats else None
    first = stats["windows"] if stats is not None else 0

    def embedded() -> None:
        if stats is not None:
            bar.set_postfix_str(f"{stats['windows'] - first:,} windows", refresh=False)
        bar.update(1)

    return embedded
