"""The shard folder `lengthwise encode` writes, as every reader sees it: its manifest, its shards and their records.

A folder holds ``manifest.json`` (the settings that made it) and shards ``{prefix}{n:05d}.npy`` with their ids
``{prefix}{n:05d}.ids.txt`` (one JSON string per line; shards written before that hold one raw id per line) and, for
multi-vector output, ``{prefix}{n:05d}.offsets.npy``. Each shard's record, ``{prefix}{n:05d}.shard.json`` (the size
and sha256 of each of its files, its id count), is written last: a shard counts only when its record is there and
every file matches it. The writer is the long-document room's (`lengthwise.longdoc.storage.store.EmbeddingStore`);
the readers here are shared by it and by the search room, which indexes the folder.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.errors import LongDocError

if TYPE_CHECKING:  # numpy loads with the first read: config modules import the renames cheaply
    import numpy as np

    from lengthwise.core.encoder import MultiVectors

__all__ = [
    "LONG_RENAMED",
    "MANIFEST",
    "PARQUET",
    "RECORD",
    "REPAIR",
    "SPANS",
    "Shard",
    "current_settings",
    "file_digest",
    "iter_shards",
    "parquet_part",
    "read_embeddings",
    "read_manifest",
    "renamed_long",
    "shards",
]

MANIFEST = "manifest.json"
RECORD = ".shard.json"
REPAIR = "rerun `lengthwise encode` with the same settings to repair it"
SHARD_NAME = re.compile(r"w\d+-\d{5,}")  # a shard's stem; any other file in the folder is not the store's
RENAMED_SETTINGS = {"engine": "runner"}  # a manifest key → its name now (`engine` until 0.2: local or ray)
LONG_RENAMED = {"top_k": "best_windows"}  # a saved long-document setting's old name → its name now (`top_k` in 0.1)
SPANS = ".spans.npy"  # a token index's shard: each token's character span (n, 2) int32 in its document's text
PARQUET = "parquet"  # the folder of the window rows inside an encoded folder, one part per shard


def renamed_long(data: Mapping[str, Any]) -> dict[str, Any]:
    """A saved long-document config under today's names (`LONG_RENAMED`); a mapping with both names keeps the new
    one's value."""
    out = dict(data)
    for old, new in LONG_RENAMED.items():
        if old in out:
            out.setdefault(new, out.pop(old))
    return out


def parquet_part(folder: Path, stem: str) -> Path:
    """Where the Parquet window rows of shard `stem` go: ``folder/parquet/part-{stem}.parquet``."""
    return folder / PARQUET / f"part-{stem}.parquet"


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
        current["long"] = renamed_long(current["long"])
    return current


def file_digest(path: Path) -> dict[str, Any]:
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
        """Every file of the shard that exists (data, offsets, ids, a token index's spans, its Parquet part,
        record)."""
        suffixes = (".npy", ".offsets.npy", SPANS, ".ids.txt", RECORD)
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
            if hashes and file_digest(path)["sha256"] != expected["sha256"]:
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


def shards(folder: Path) -> list[Shard]:
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


def iter_shards(folder: str | Path, *, mmap: bool = False) -> Iterator[tuple[list[str], np.ndarray, np.ndarray | None]]:
    """(ids, vectors, window offsets or None) of each complete shard of `folder`, in order, each checked first
    (size and sha256 of its files; a damaged one raises `LongDocError` naming it). With `mmap`, the vectors are
    memory-mapped, not read: a corpus larger than memory streams shard by shard. A shard whose arrays disagree
    (offsets, ids, vectors) or whose dimension differs from the first shard's raises `LongDocError` naming it."""
    import numpy as np

    dim = None
    for shard in shards(Path(folder)):
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
    import numpy as np

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
    import numpy as np

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
