"""An index folder's files (`lengthwise.search.index`): what a build may write over and has room for, its
staged vectors, ids and distinct-vector members, the engine filled and saved in checkpoints, and the checks an
opened folder passes. `LongIndex` builds and opens folders with these; each build's files are one generation of
the index folder (`lengthwise.search.local.generations`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from lengthwise.core.errors import DataFormatError, LongDocError, SettingError
from lengthwise.core.shards import RECORD
from lengthwise.search.local.engines import ENGINES, EngineIndex
from lengthwise.search.local.generations import GENERATION, INDEX_FILE, generation_folder, is_generation, mark
from lengthwise.search.local.staging import content_address, unit_vectors
from lengthwise.search.types import Engine, IndexSettings, Quantize

# 3: each build's files in a generation folder, index.json naming it (`_generations`); 2: distinct vectors in the
# engine (members.npy, member_starts.npy), ids as JSON lines, files beside index.json; 1: neither. Only 3 opens.
FORMAT = 3
MEMBERS, STARTS = "members.npy", "member_starts.npy"
CHUNK = 65_536  # windows added to the engine at once
CHECKPOINT_SECONDS = 300.0  # the most engine work a killed build loses: it resumes from the last save
Progress = Callable[[int, int], None] | None  # called with (distinct vectors added, distinct vectors)
TRAIN_SAMPLE = 100_000  # windows an engine that needs training (FAISS IVF) learns its lists from


def disk_needed(windows: int, dim: int, quantize: Quantize, resumed: bool = False) -> int:
    """Bytes a build of `windows` vectors still needs on disk, generously: the fp32 copy (unless a resumed build has
    it already) plus twice the engine's file, which is saved beside its last save (its vectors and up to 200 bytes of
    lists or graph links per window; measured: 150 for USearch, 10 for FAISS)."""
    engine = {Quantize.NONE: 4 * dim, Quantize.INT8: dim, Quantize.UBINARY: -(-dim // 8)}[quantize]
    return windows * ((0 if resumed else 4 * dim) + 2 * (engine + 200))


TEXT_SIDE = ("lexical", ".lexical-building")  # the lexical side in a generation, and its staging while built
# what an index of format 1 or 2 kept beside its index.json (and a stopped lexical build of before both sides were
# built in one staging folder): a build over such an index removes them once its own generation is in place
OLD_LAYOUT = frozenset({"vectors.npy", "offsets.npy", "ids.txt", MEMBERS, STARTS, "engine.faiss", "engine.usearch",
                        *TEXT_SIDE, ".lexical-replaced"})  # fmt: skip
REBUILD = "build it again with `lengthwise index build`"


def _is_index_name(name: str) -> bool:
    """Whether an index folder may hold `name`: its ``index.json``, a generation, or an earlier layout's file."""
    return name == INDEX_FILE or is_generation(name) or name in OLD_LAYOUT


def read_settings(folder: Path) -> IndexSettings:
    """The settings in an index folder's ``index.json``, naming the generation it serves; a `LongDocError` naming the
    folder when there is none, it is unreadable, or it is an index of an earlier layout (format 1 or 2)."""
    if not (folder / INDEX_FILE).is_file():
        raise LongDocError(None, None, f"{folder}: no {INDEX_FILE}; build one with `lengthwise index build`")
    try:
        settings = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))
        generation = settings.get(GENERATION) if isinstance(settings, dict) else None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise LongDocError(None, None, f"{folder}: unreadable index ({error}); {REBUILD}") from None
    if not isinstance(generation, str) or settings.get("format") != FORMAT:
        found = settings.get("format", 1) if isinstance(settings, dict) else "unknown"
        raise LongDocError(None, None, f"{folder}: an index of an earlier layout (format {found}; this lengthwise "
                           f"reads format {FORMAT}); {REBUILD}")  # fmt: skip
    return settings


def served_files(folder: Path) -> Path:
    """The folder of the generation the index `folder` serves now (its vectors, engine, ``lexical/``): for tools and
    tests that look at the files; a search opens the index (`LongIndex.open`), which holds its generation."""
    return generation_folder(folder, read_settings(folder)[GENERATION])


def check_out(encoded: Path, out: Path) -> None:
    """Refuse an `out` that a build could not write, or whose replacement would lose what is not the index's."""
    if out.is_symlink():
        raise SettingError("out", str(out), f"is a symbolic link (to {os.readlink(out)}); pass the folder itself")
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise SettingError("out", str(out), f"{parent} is a file; pass a folder path")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        raise SettingError("out", str(out), f"cannot write in {parent} ({err.strerror}); pass a folder you can "
                           "write to") from None  # fmt: skip
    if not out.exists():
        return
    if not out.is_dir() or not (out / INDEX_FILE).is_file():
        raise SettingError("out", str(out), "exists and is not an index; pass a new folder or an earlier index")
    here, target = Path.cwd().resolve(), out.resolve()
    if here == target or target in here.parents:
        raise SettingError("out", str(out), "holds the working directory; build into a new folder")
    if encoded.resolve() == target or target in encoded.resolve().parents:
        raise SettingError("out", str(out), f"holds {encoded}, the folder to index; build into a new folder")
    if foreign := sorted(path.name for path in out.iterdir() if not _is_index_name(path.name)):
        raise SettingError("out", str(out), f"holds {foreign[0]}, which is not the index's; move it out or pass "
                           "a new folder")  # fmt: skip


def records_digest(files: list[Path]) -> str:
    """A sha256 over the records of the shards whose vector files are `files` (each record holds the sha256 of
    its shard's files): a resumed build whose shards changed since is another build."""
    hasher = hashlib.sha256()
    for file in files:
        hasher.update(file.name.encode() + b"\0" + file.with_name(file.name[: -len(".npy")] + RECORD).read_bytes())
    return hasher.hexdigest()


def _size(count: float) -> str:
    """Bytes for a message: 3.2 GB, 41 MB, 12 kB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} bytes"


def check_room(out: Path, need: int, windows: int) -> None:
    """Refuse a build that the disk under `out` has no room for."""
    free = shutil.disk_usage(out.parent).free
    if need > free:
        raise SettingError("out", str(out), f"needs about {_size(need)} of disk for {windows:,} windows and "
                           f"{_size(free)} is free; free space or pass another folder")  # fmt: skip


def fill_engine(
    path: Path, engine: Engine, quantize: Quantize, vectors: np.ndarray, rows: np.ndarray, on_progress: Progress
) -> None:
    """Add the windows `rows` of `vectors` (the first of each distinct vector) to a new engine under the keys 0,
    1, …, or to the one saved at `path` by an interrupted build (from its count on), saving it there at least every
    `CHECKPOINT_SECONDS` and at the end (each save atomic)."""
    windows, ann = len(rows), None
    if path.is_file():
        try:
            ann = ENGINES[engine].load(path, quantize, view=False)
        except (OSError, RuntimeError, ValueError):
            ann = None  # unreadable: start the engine again
    if ann is None:
        ann = ENGINES[engine](quantize, vectors.shape[1], windows)
        rng = np.random.default_rng(0)
        ann.train(vectors[rows[np.sort(rng.choice(windows, size=min(windows, TRAIN_SAMPLE), replace=False))]])
    saved = time.monotonic()
    for first in range(ann.count(), windows, CHUNK):
        ann.add(np.asarray(vectors[rows[first : first + CHUNK]]), first)
        if on_progress is not None:
            on_progress(min(first + CHUNK, windows), windows)
        if time.monotonic() - saved >= CHECKPOINT_SECONDS:
            save_engine(ann, path)
            saved = time.monotonic()
    save_engine(ann, path)


def save_engine(ann: EngineIndex, path: Path) -> None:
    """Save the engine to `path` atomically (written beside it, then renamed over it)."""
    part = path.with_name(path.name + ".part")
    ann.save(part)
    os.replace(part, path)


def write_ids(path: Path, ids: Sequence[str]) -> None:
    """Document ids, one JSON string per line: any string round-trips (a line break in an id stays in it)."""
    path.write_text("".join(json.dumps(i) + "\n" for i in ids), encoding="utf-8")


def read_ids(path: Path) -> list[str]:
    """The ids `write_ids` wrote."""
    ids = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
    if not all(isinstance(i, str) for i in ids):
        raise DataFormatError(None, None, f"{path.name} holds a line that is not a JSON string")
    return ids


def stage_vectors(staging: Path, files: list[Path], counts: np.ndarray, ids: list[str], dim: int) -> np.ndarray:
    """Write a new build's vectors, offsets, ids and distinct-vector members into `staging`; the vectors, mapped."""
    staging.mkdir()
    mark(staging)
    vectors = unit_vectors(files, staging / "vectors.npy", int(counts.sum()), dim, CHUNK)
    members, starts = content_address(vectors, CHUNK)
    np.save(staging / MEMBERS, members)
    np.save(staging / STARTS, starts)
    np.save(staging / "offsets.npy", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
    write_ids(staging / "ids.txt", ids)
    return vectors


def read_members(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(members, starts) of an index's generation folder (members memory-mapped)."""
    members = np.load(folder / MEMBERS, mmap_mode="r", allow_pickle=False)
    return members, np.load(folder / STARTS, allow_pickle=False)


def consistent_files(settings: IndexSettings, ids: list[str], offsets: np.ndarray, vectors: np.ndarray,
                     members: np.ndarray, starts: np.ndarray, keys: int) -> bool:  # fmt: skip
    """Whether the files of an index agree: counts, sizes and the offsets' and members' order."""
    windows, distinct = settings["windows"], settings["distinct"]
    if offsets.ndim != 1 or len(ids) + 1 != len(offsets) or len(vectors) != windows or keys != distinct:
        return False
    if not np.issubdtype(offsets.dtype, np.integer) or offsets[0] != 0 or offsets[-1] != windows:
        return False
    if len(members) != windows or len(starts) != distinct + 1 or starts[0] != 0 or starts[-1] != windows:
        return False
    return bool((np.diff(offsets) >= 0).all() and (np.diff(starts) > 0).all())
