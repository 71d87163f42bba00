"""An approximate-nearest-neighbour index over the window vectors `lengthwise encode` wrote, searched by document.

The length-specific part is ours; the engines are not. Candidate windows come from FAISS (IVF over 8-bit scalar
quantized vectors, or IVF over packed sign bits for ``ubinary``) or USearch (HNSW over i8 or b1 vectors). They
are rescored *exactly*, from the fp32 vectors kept memory-mapped in the index folder (never loaded whole), in two
steps: the candidate windows themselves rank their documents, then the best documents are scored on every window
with `lengthwise.core.encoder.multi_vector_scores` (max, or the mean of the best `top_k` windows) — so a document
returned has the same score as in an exact scan, and only those few documents are read whole. This follows the
rescoring scheme of sentence-transformers' ``semantic_search_faiss`` / ``semantic_search_usearch`` (oversample
candidates on quantized vectors, rescore them), at document level.

Folder layout: ``index.json`` (settings, counts, engine), ``vectors.npy`` (W, D) fp32, ``offsets.npy`` (n + 1,)
window offsets per document, ``ids.txt`` (document ids) and ``engine.faiss`` or ``engine.usearch``. A build is
written into a staging folder and renamed into place, so an interrupted build leaves no half-written index; run
again with the same inputs, it resumes from its last engine save (`lengthwise.longdoc._staging`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from lengthwise.core.encoder import MultiVectors, multi_vector_scores
from lengthwise.core.errors import SettingError
from lengthwise.core.scoring import WindowScoring
from lengthwise.longdoc._staging import BUILD_STATE, record_plan, shard_layout, staging_folder, unit_vectors
from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.store import MANIFEST

__all__ = ["Engine", "Quantize", "WindowIndex"]

INDEX_FILE = "index.json"
CHUNK = 65_536  # windows added to the engine at once
RESCORED, RESCORED_AT_LEAST = 10, 100  # documents scored on all their windows: per document asked for, at least
CHECKPOINT_SECONDS = 300.0  # the most engine work a killed build loses: it resumes from the last save
Progress = Callable[[int, int], None] | None  # called with (windows added, windows)
TRAIN_SAMPLE = 100_000  # windows an engine that needs training (FAISS IVF) learns its lists from
REBUILD = "build it again with `lengthwise index build`"


class Quantize(str, Enum):
    """How the candidate stage stores the window vectors."""

    NONE = "none"  # fp32 (exact inner product in the engine)
    INT8 = "int8"  # 8-bit scalar quantization, 1 byte per dimension
    UBINARY = "ubinary"  # the sign bit of each dimension, packed: D / 8 bytes


# Candidate windows per query. Sign bits rank windows more coarsely, so they get more before the exact rescoring,
# as sentence-transformers' `rescore_multiplier` oversamples (docs/longdoc.md, "More candidates for sign bits").
CANDIDATES = {Quantize.NONE: 1000, Quantize.INT8: 1000, Quantize.UBINARY: 4000}


class Engine(str, Enum):
    """The ANN library behind the candidate stage."""

    FAISS = "faiss"
    USEARCH = "usearch"


Choice = TypeVar("Choice", Quantize, Engine)


def _choice(kind: type[Choice], field: str, value: Any) -> Choice:
    """`value` as a member of the enum `kind`, or a `SettingError` on `field` listing the choices."""
    try:
        return kind(value)
    except ValueError:
        raise SettingError(field, value, f"use {' or '.join(m.value for m in kind)}") from None


def _require(engine: Engine) -> Any:
    module = {"faiss": "faiss", "usearch": "usearch.index"}[engine.value]
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        package = {"faiss": "faiss-cpu", "usearch": "usearch"}[engine.value]
        raise SettingError(
            "engine", engine.value, f"{package} is not installed; pip install 'lengthwise[index]'"
        ) from None


def _packbits(vectors: np.ndarray) -> np.ndarray:
    """Sign bits, packed (sentence-transformers' ``ubinary``): (n, D) float → (n, D / 8) uint8."""
    return np.packbits(vectors > 0, axis=-1)


def _nlist(windows: int) -> int:
    """IVF lists: about 4·√W (FAISS's guideline is 4·√W to 16·√W), at least 1."""
    return max(1, min(int(4 * np.sqrt(windows)), windows // 39 or 1))


class _Faiss:
    def __init__(self, quantize: Quantize, dim: int, windows: int) -> None:
        faiss = _require(Engine.FAISS)
        self.faiss, self.quantize, nlist = faiss, quantize, _nlist(windows)
        if quantize is Quantize.UBINARY:
            self.index = faiss.IndexBinaryIVF(faiss.IndexBinaryFlat(dim), dim, nlist)
        else:
            kind = faiss.ScalarQuantizer.QT_8bit if quantize is Quantize.INT8 else faiss.ScalarQuantizer.QT_fp16
            if quantize is Quantize.NONE:
                self.index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
            else:
                self.index = faiss.IndexIVFScalarQuantizer(
                    faiss.IndexFlatIP(dim), dim, nlist, kind, faiss.METRIC_INNER_PRODUCT
                )

    def _prepare(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        return _packbits(vectors) if self.quantize is Quantize.UBINARY else vectors

    def train(self, sample: np.ndarray) -> None:
        self.index.train(self._prepare(sample))

    def add(self, vectors: np.ndarray, first: int) -> None:
        self.index.add(self._prepare(vectors))  # ids are the running window numbers

    def count(self) -> int:
        return int(self.index.ntotal)

    def set_probes(self, probes: int) -> None:
        self.index.nprobe = probes

    def search(self, queries: np.ndarray, count: int) -> np.ndarray:
        _, found = self.index.search(self._prepare(queries), count)
        return found  # (Q, count) window numbers, -1 where fewer exist

    def save(self, path: Path) -> None:
        write = self.faiss.write_index_binary if self.quantize is Quantize.UBINARY else self.faiss.write_index
        write(self.index, str(path))

    @classmethod
    def load(cls, path: Path, quantize: Quantize, view: bool = True) -> _Faiss:  # FAISS reads it whole either way
        engine = cls.__new__(cls)
        engine.faiss, engine.quantize = _require(Engine.FAISS), quantize
        read = engine.faiss.read_index_binary if quantize is Quantize.UBINARY else engine.faiss.read_index
        engine.index = read(str(path))
        return engine


class _USearch:
    def __init__(self, quantize: Quantize, dim: int, windows: int) -> None:
        usearch = _require(Engine.USEARCH)
        self.quantize = quantize
        if quantize is Quantize.UBINARY:
            self.index = usearch.Index(ndim=dim, metric="hamming", dtype="b1")
        else:
            self.index = usearch.Index(ndim=dim, metric="ip", dtype="i8" if quantize is Quantize.INT8 else "f32")

    def _prepare(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        return _packbits(vectors) if self.quantize is Quantize.UBINARY else vectors

    def train(self, sample: np.ndarray) -> None:  # HNSW needs no training
        pass

    def add(self, vectors: np.ndarray, first: int) -> None:
        self.index.add(np.arange(first, first + len(vectors), dtype=np.uint64), self._prepare(vectors))

    def count(self) -> int:
        return len(self.index)

    def set_probes(self, probes: int) -> None:
        self.index.expansion_search = max(probes, 16)

    def search(self, queries: np.ndarray, count: int) -> np.ndarray:
        found = self.index.search(self._prepare(queries), count)
        keys = np.full((len(queries), count), -1, dtype=np.int64)
        if hasattr(found, "counts"):  # BatchMatches: rows padded past each query's count
            for row, (row_keys, kept) in enumerate(zip(np.asarray(found.keys), np.asarray(found.counts), strict=True)):
                keys[row, :kept] = row_keys[:kept]
        else:  # Matches: one query, only what was found
            row_keys = np.asarray(found.keys, dtype=np.int64)
            keys[0, : len(row_keys)] = row_keys
        return keys

    def save(self, path: Path) -> None:
        self.index.save(str(path))

    @classmethod
    def load(cls, path: Path, quantize: Quantize, view: bool = True) -> _USearch:
        engine = cls.__new__(cls)
        engine.quantize = quantize
        engine.index = _require(Engine.USEARCH).Index.restore(str(path), view=view)  # view: memory-mapped, read-only
        return engine


_ENGINES: dict[Engine, Any] = {Engine.FAISS: _Faiss, Engine.USEARCH: _USearch}


def _disk_needed(windows: int, dim: int, quantize: Quantize, resumed: bool = False) -> int:
    """Bytes a build of `windows` vectors still needs on disk, generously: the fp32 copy (unless a resumed build has
    it already) plus twice the engine's file, which is saved beside its last save (its vectors and up to 200 bytes of
    lists or graph links per window; measured: 150 for USearch, 10 for FAISS)."""
    engine = {Quantize.NONE: 4 * dim, Quantize.INT8: dim, Quantize.UBINARY: -(-dim // 8)}[quantize]
    return windows * ((0 if resumed else 4 * dim) + 2 * (engine + 200))


def _fill(path: Path, engine: Engine, quantize: Quantize, vectors: np.ndarray, on_progress: Progress) -> None:
    """Add every window of `vectors` to a new engine, or to the one saved at `path` by an interrupted build (from
    its count on), saving it there at least every `CHECKPOINT_SECONDS` and at the end (each save atomic)."""
    windows, ann = len(vectors), None
    if path.is_file():
        try:
            ann = _ENGINES[engine].load(path, quantize, view=False)
        except (OSError, RuntimeError, ValueError):
            ann = None  # unreadable: start the engine again
    if ann is None:
        ann = _ENGINES[engine](quantize, vectors.shape[1], windows)
        rng = np.random.default_rng(0)
        ann.train(vectors[np.sort(rng.choice(windows, size=min(windows, TRAIN_SAMPLE), replace=False))])
    saved = time.monotonic()
    for first in range(ann.count(), windows, CHUNK):
        ann.add(np.asarray(vectors[first : first + CHUNK]), first)
        if on_progress is not None:
            on_progress(min(first + CHUNK, windows), windows)
        if time.monotonic() - saved >= CHECKPOINT_SECONDS:
            _save(ann, path)
            saved = time.monotonic()
    _save(ann, path)


def _save(ann: Any, path: Path) -> None:
    """Save the engine to `path` atomically (written beside it, then renamed over it)."""
    part = path.with_name(path.name + ".part")
    ann.save(part)
    os.replace(part, path)


@dataclass
class WindowIndex:
    """Window vectors indexed for document search (see the module docstring). Build with `build`, open with `open`."""

    folder: Path
    settings: dict[str, Any]
    doc_ids: list[str]
    offsets: np.ndarray  # (n + 1,) window offsets of each document in `vectors`
    vectors: np.ndarray  # (W, D) fp32, memory-mapped
    engine: Any

    @classmethod
    def build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
        extra: dict[str, Any] | None = None,
        on_progress: Progress = None,
    ) -> WindowIndex:
        """Index the folder `lengthwise encode` wrote (`encoded`) into `out` (new, or an earlier index: replaced).

        Args:
            encoded: The shard folder; every shard is checked (size and sha256) before anything is indexed.
            out: The index folder; built in a staging folder beside it and renamed into place.
            quantize: ``int8`` (default), ``ubinary`` or ``none`` for the candidate stage.
            engine: ``usearch`` (HNSW; default: it found ≥ 0.99 of the exact top-100 documents on SciFact at its
                default search expansion) or ``faiss`` (IVF; needs about a quarter of its lists probed for that).
            extra: More settings to record in ``index.json`` (the query model's fingerprint, …).
            on_progress: Called with (windows added, windows) as the engine is filled.
        """
        quantize, engine = _choice(Quantize, "quantize", quantize), _choice(Engine, "engine", engine)
        encoded, out = Path(encoded), Path(out)
        if out.exists() and not (out / INDEX_FILE).is_file():
            raise SettingError("out", str(out), "exists and is not an index; pass a new folder or an earlier index")
        if not (encoded / MANIFEST).is_file():
            raise LongDocError(f"{encoded}: no {MANIFEST}; index a folder written by `lengthwise encode`")
        manifest = json.loads((encoded / MANIFEST).read_text(encoding="utf-8"))
        ids, counts, dim, files = shard_layout(encoded)  # checks every shard; a damaged one names its file
        windows = int(counts.sum())
        out.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()
        plan = {"quantize": quantize.value, "engine": engine.value, "windows": windows, "dim": dim,
                "encoded": str(encoded.resolve()), "ids_sha256": digest}  # fmt: skip
        staging, resumed = staging_folder(out, plan)
        need, free = _disk_needed(windows, dim, quantize, resumed), shutil.disk_usage(out.parent).free
        if need > free:
            raise SettingError("out", str(out), f"needs about {need / 1e9:.1f} GB of disk for {windows:,} windows "
                               f"and {free / 1e9:.1f} GB is free; free space or pass another folder")  # fmt: skip
        try:
            if resumed:
                vectors = np.load(staging / "vectors.npy", mmap_mode="r", allow_pickle=False)
            else:
                staging.mkdir()
                vectors = unit_vectors(files, staging / "vectors.npy", windows, dim, CHUNK)
                np.save(staging / "offsets.npy", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
                (staging / "ids.txt").write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
                record_plan(staging, plan)
            _fill(staging / f"engine.{engine.value}", engine, quantize, vectors, on_progress)
            del vectors  # the memory map, closed before the rename
            nlist = _nlist(windows) if engine is Engine.FAISS else None
            settings = {"format": 1, **plan, "documents": len(ids), "nlist": nlist,
                        "encode_settings": manifest["settings"], **(extra or {})}  # fmt: skip
            (staging / INDEX_FILE).write_text(json.dumps(settings, indent=1), encoding="utf-8")
            (staging / BUILD_STATE).unlink()
            if out.exists():
                shutil.rmtree(out)
            os.rename(staging, out)
        except KeyboardInterrupt:
            raise  # the staging folder stays: the same build, run again, resumes from it
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls.open(out)

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> WindowIndex:
        """Open an index folder; the fp32 vectors are memory-mapped, the engine's file loaded (USearch: mapped)."""
        folder = Path(folder)
        if not (folder / INDEX_FILE).is_file():
            raise LongDocError(f"{folder}: no {INDEX_FILE}; build one with `lengthwise index build`")
        try:
            settings = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))
            engine = Engine(settings["engine"])
            doc_ids = (folder / "ids.txt").read_text(encoding="utf-8").splitlines()
            offsets = np.load(folder / "offsets.npy", allow_pickle=False)
            vectors = np.load(folder / "vectors.npy", mmap_mode="r", allow_pickle=False)
            ann = _ENGINES[engine].load(folder / f"engine.{engine.value}", Quantize(settings["quantize"]))
        except (OSError, ValueError, KeyError, RuntimeError) as error:
            raise LongDocError(
                f"{folder}: unreadable index ({error}); build it again with `lengthwise index build`"
            ) from None
        if len(doc_ids) + 1 != len(offsets) or offsets[-1] != len(vectors) or len(vectors) != settings["windows"]:
            raise LongDocError(
                f"{folder}: the index files disagree in size; build it again with `lengthwise index build`"
            )
        return cls(folder, settings, doc_ids, offsets, vectors, ann)

    def default_probes(self) -> int:
        """FAISS: a quarter of the IVF lists (at least 32); USearch: a search expansion of 64."""
        nlist = self.settings.get("nlist") or 0
        return max(32, nlist // 4) if self.settings["engine"] == Engine.FAISS.value else 64

    def default_windows(self) -> int:
        """Candidate windows per query: 1,000, or 4,000 over sign bits (``ubinary``), whose candidates held 0.95
        (USearch) and 0.94 (FAISS) of the exact top-100 SciFact documents at 1,000, and 0.998 and 0.980 at 4,000."""
        return CANDIDATES[Quantize(self.settings["quantize"])]

    def candidate_windows(self, queries: np.ndarray, windows: int, probes: int) -> list[np.ndarray]:
        """Per query, its `windows` nearest windows in the engine (approximate), as sorted window numbers."""
        self.engine.set_probes(probes)
        found = self.engine.search(np.asarray(queries, dtype=np.float32), min(windows, len(self.vectors)))
        return [np.sort(row[row >= 0]) for row in found]

    def candidates(self, queries: np.ndarray, windows: int, probes: int) -> list[np.ndarray]:
        """Per query, the distinct documents of its `windows` nearest windows in the engine (approximate)."""
        owners = (self._owner(row) for row in self.candidate_windows(queries, windows, probes))
        return [np.unique(owner) for owner in owners]

    def _owner(self, windows: np.ndarray) -> np.ndarray:
        """The document of each window number."""
        return np.searchsorted(self.offsets, windows, side="right") - 1

    def _scores(self, query: torch.Tensor, rows: np.ndarray, offsets: np.ndarray, scoring: WindowScoring | int) -> Any:
        """Exact scores of the documents whose windows are `rows` (sorted), grouped by `offsets`."""
        subset = MultiVectors(np.asarray(self.vectors[rows]), offsets)
        return multi_vector_scores(query[None], subset, scoring)[0].numpy()

    def _rescored(self, query: torch.Tensor, found: np.ndarray, k: int, scoring: WindowScoring | int) -> list[Any]:
        """The `k` best documents for one query from its candidate windows `found` (sorted): each candidate document
        scored on its candidate windows (exact fp32, those windows only), then the best `RESCORED` · k (at least
        100) scored on all their windows."""
        docs, first = np.unique(self._owner(found), return_index=True)
        provisional = self._scores(query, found, np.append(first, len(found)), scoring)
        docs = np.sort(docs[np.argsort(-provisional, kind="stable")[: max(RESCORED * k, RESCORED_AT_LEAST)]])
        starts, ends = self.offsets[docs], self.offsets[docs + 1]
        rows = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)])
        scores = self._scores(query, rows, np.concatenate([[0], np.cumsum(ends - starts)]), scoring)
        best = np.argsort(-scores, kind="stable")[:k]
        return [(self.doc_ids[docs[j]], float(scores[j])) for j in best]

    def search_vectors(
        self,
        queries: np.ndarray,
        k: int = 10,
        *,
        scoring: WindowScoring | int = 1,
        windows: int | None = None,
        probes: int | None = None,
    ) -> list[list[tuple[str, float]]]:
        """The `k` best documents per (normalised) query row: candidates from the engine, rescored exactly.

        Args:
            queries: (Q, D) query vectors.
            k: Documents per query.
            scoring: How a document scores from its windows (`WindowScoring`; an int is a top-k: 1 = max).
            windows: Candidate windows the engine returns per query (more: higher recall, slower; default
                `default_windows`: 1,000, or 4,000 over sign bits).
            probes: FAISS IVF lists visited (default: a quarter of the lists, which found ≥ 0.98 of the exact top-100
                documents on SciFact) or USearch's search expansion (default 64).
        """
        probes = probes if probes is not None else self.default_probes()
        windows = windows if windows is not None else self.default_windows()
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        found = self.candidate_windows(units.numpy(), windows, probes)
        return [
            self._rescored(query, rows, k, scoring) if len(rows) else []
            for query, rows in zip(units, found, strict=True)
        ]

    def exact_vectors(
        self, queries: np.ndarray, k: int = 10, *, scoring: WindowScoring | int = 1
    ) -> list[list[tuple[str, float]]]:
        """The same ranking by an exact scan over every window (for checks and benchmarks, not for serving)."""
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        scores = multi_vector_scores(units, MultiVectors(np.array(self.vectors), self.offsets), scoring)
        results = []
        for row in scores.numpy():
            best = np.argsort(-row, kind="stable")[:k]
            results.append([(self.doc_ids[j], float(row[j])) for j in best])
        return results


def hits_json(query_id: str, hits: Sequence[tuple[str, float]]) -> str:
    """One search result as a JSON line: ``{"query_id": …, "hits": [{"id": …, "score": …}, …]}``, best first."""
    return json.dumps({"query_id": query_id, "hits": [{"id": i, "score": round(s, 6)} for i, s in hits]})
