"""An index folder built in steps that survive a kill (`lengthwise.search.index.LongIndex.build_windows`).

The shards are checked once and their vectors memory-mapped (`shard_layout`); the unit vectors are streamed into
a memory-mapped ``vectors.npy`` whose disk blocks are allocated first (`unit_vectors`). All of it is
written into one staging folder beside the index, ``.{name}-building``, marked as lengthwise's
(`lengthwise.search.local.generations.MARKER`: a folder of that name without it is someone else's, and a build
refuses to touch it). When the vectors, offsets and ids are
complete, the build's plan (inputs and settings) is recorded there (`BUILD_STATE`), and the engine is saved there
from time to time. The engine holds each distinct window vector once (`content_address`): identical windows (a
template, a disclaimer, the filler of a passkey test repeated in every document) are one vector standing for all
their rows. Once the engine is complete, ``index.json`` is written there; the lexical side is then built in the
same folder. A rerun of the same build finds the plan and resumes from the last engine save, or keeps a complete
engine and resumes the lexical side; any other build starts afresh (`staging_folder`). The finished folder becomes
a generation of the index (`lengthwise.search.local.generations.publish`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from lengthwise.core.errors import LongDocError
from lengthwise.core.results import write_json_atomic
from lengthwise.core.shards import iter_shards
from lengthwise.search.local.generations import MARKER, check_marked, mark

__all__ = [
    "BUILD_STATE",
    "aside_of",
    "content_address",
    "record_plan",
    "shard_layout",
    "staging_folder",
    "swap_in",
    "unit_vectors",
]

BUILD_STATE = "build.json"


def shard_layout(encoded: Path) -> tuple[list[str], np.ndarray, int, list[Path]]:
    """Every document id, its window count, the dimension and the shards' vector files, from the shards' ids,
    offsets and array headers (each shard checked once, here; its vectors memory-mapped, not read)."""
    ids: list[str] = []
    counts: list[np.ndarray] = []
    files: list[Path] = []
    dim = 0
    for shard_ids, array, offsets in iter_shards(encoded, mmap=True):
        ids += shard_ids
        counts.append(np.diff(offsets) if offsets is not None else np.ones(len(shard_ids), dtype=np.int64))
        assert isinstance(array, np.memmap) and array.filename is not None  # mmap=True
        files.append(Path(array.filename))
        dim = array.shape[1]
    if not ids:
        raise LongDocError(None, None, f"{encoded}: no complete shard yet")
    return ids, np.concatenate(counts).astype(np.int64), dim, files


def _allocate(path: Path) -> None:
    """Give the memory-mapped file at `path` its disk blocks now (where the OS can): a disk that fills during the
    build then fails here with an error, instead of killing the process (SIGBUS) when a mapped page is written."""
    if not hasattr(os, "posix_fallocate"):
        return
    descriptor = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(descriptor, 0, path.stat().st_size)
    except OSError as err:
        raise LongDocError(
            None,
            None,
            f"{path.parent}: no room for the index's vectors ({err.strerror}); free disk space or "
            "build into another folder",
        ) from None
    finally:
        os.close(descriptor)


def unit_vectors(files: list[Path], path: Path, windows: int, dim: int, chunk: int) -> np.ndarray:
    """Every window vector of the shard files (checked by `shard_layout`), L2-normalised, streamed file by file and
    `chunk` rows at a time into the ``.npy`` at `path`; returned memory-mapped. Memory stays at one chunk, whatever
    the corpus size."""
    vectors = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(windows, dim))
    _allocate(path)
    row = 0
    for file in files:
        array = np.load(file, allow_pickle=False, mmap_mode="r")
        for first in range(0, len(array), chunk):
            part = np.asarray(array[first : first + chunk], dtype=np.float32)
            norms = np.maximum(np.linalg.norm(part, axis=1, keepdims=True), 1e-12)  # as torch's normalize
            vectors[row : row + len(part)] = part / norms
            row += len(part)
    vectors.flush()
    return vectors


def content_address(vectors: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of `vectors` by their exact bytes, numbered in the order they first appear: ``(members,
    starts)``, where ``members[starts[u] : starts[u + 1]]`` are the rows (ascending) holding distinct vector ``u``
    and ``members[starts[u]]`` is its first row. Without duplicates both are ``arange``. Rows are grouped by a
    64-bit BLAKE2b of their bytes, then each compared with its group's first row: a row that only shares the hash
    (about once in 10^5 builds of 10M windows) becomes a vector of its own. Read `chunk` rows at a time; memory is
    about 40 bytes per row."""
    digests = np.empty(len(vectors), dtype=np.uint64)
    for first in range(0, len(vectors), chunk):
        part = np.ascontiguousarray(vectors[first : first + chunk], dtype=np.float32)
        joined = b"".join(hashlib.blake2b(row, digest_size=8).digest() for row in part)
        digests[first : first + len(part)] = np.frombuffer(joined, dtype=np.uint64)
    _, first_seen, inverse = np.unique(digests, return_index=True, return_inverse=True)
    del digests
    number = np.empty(len(first_seen), dtype=np.int64)
    number[np.argsort(first_seen, kind="stable")] = np.arange(len(first_seen))  # by first appearance
    distinct = number[inverse.reshape(-1)]
    del inverse, number
    distinct = _split_collisions(vectors, distinct, np.sort(first_seen), chunk)
    members = np.argsort(distinct, kind="stable").astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(np.bincount(distinct))]).astype(np.int64)
    return members, starts


def _split_collisions(vectors: np.ndarray, distinct: np.ndarray, firsts: np.ndarray, chunk: int) -> np.ndarray:
    """`distinct` with each row whose bytes differ from its vector's first row (`firsts[u]`) given a number of its
    own (after the others)."""
    following = int(distinct.max(initial=-1)) + 1
    for first in range(0, len(vectors), chunk):
        rows = np.arange(first, min(first + chunk, len(vectors)))
        shared = rows[firsts[distinct[rows]] != rows]  # rows after the first of their vector
        if not len(shared):
            continue
        mine = np.ascontiguousarray(vectors[shared], dtype=np.float32).view(np.uint32)
        theirs = np.ascontiguousarray(vectors[firsts[distinct[shared]]], dtype=np.float32).view(np.uint32)
        for row in shared[(mine != theirs).any(axis=1)]:
            distinct[row], following = following, following + 1
    return distinct


def staging_folder(out: Path, plan: Mapping[str, object]) -> tuple[Path, bool]:
    """The staging folder of a build of `out` and whether it resumes: True when an earlier build with the same
    `plan` left its vectors complete there. Otherwise whatever is there (another build's, or a half-written copy)
    is removed, and the build starts afresh; a folder of that name that lengthwise did not make is refused
    (`SettingError` on ``out``), never removed."""
    staging = out.parent / f".{out.name}-building"
    check_marked(staging, out)
    try:
        if json.loads((staging / BUILD_STATE).read_text(encoding="utf-8")) == plan:
            return staging, True
    except (OSError, ValueError):
        pass
    shutil.rmtree(staging, ignore_errors=True)
    return staging, False


def record_plan(staging: Path, plan: Mapping[str, object]) -> None:
    """Mark the staging folder's vectors, offsets and ids complete for `plan`: from here on a rerun resumes."""
    write_json_atomic(staging / BUILD_STATE, plan)


def aside_of(out: Path) -> Path:
    """Where `swap_in` puts the folder `out` it replaces, until the new one is in place."""
    return out.parent / f".{out.name}-replaced"


def swap_in(staging: Path, out: Path) -> None:
    """Put the finished folder `staging` (a lexical side) in place of `out`: an earlier one is renamed aside first
    (``.{name}-replaced``, marked as lengthwise's), renamed back if the new one cannot take its place, and removed
    only once it has. A folder by the aside's name that lengthwise did not make is refused, never removed. (An index
    is not swapped in so: a build adds a generation to it, `lengthwise.search.local.generations.publish`.)"""
    aside = aside_of(out)
    check_marked(aside, out)
    shutil.rmtree(aside, ignore_errors=True)
    if out.exists():
        os.rename(out, aside)
        mark(aside)
    try:
        os.rename(staging, out)
        (out / MARKER).unlink(missing_ok=True)  # in place, no more a staging folder
    except BaseException:
        if aside.exists():
            os.rename(aside, out)
        raise
    shutil.rmtree(aside, ignore_errors=True)
