"""The ANN engines behind `LongIndex`'s candidate stage, one adapter each with the same six calls (train, add,
count, set_probes, search, save / load): FAISS (IVF over 8-bit scalar quantized vectors, fp32, or packed sign bits)
and USearch (HNSW over i8, f32 or b1 vectors). Keys are the running numbers of the distinct window vectors added.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Protocol

import numpy as np

from lengthwise.search.types import Engine, Quantize

__all__ = ["CANDIDATES", "ENGINES", "EngineIndex", "EngineKind", "ivf_lists"]


# Candidate windows per query. Sign bits rank windows more coarsely, so they get more before the exact rescoring,
# as sentence-transformers' `rescore_multiplier` oversamples (docs/longdoc.md, "More candidates for sign bits").
CANDIDATES = {Quantize.NONE: 1000, Quantize.INT8: 1000, Quantize.UBINARY: 4000}


class EngineIndex(Protocol):
    """An ANN engine's index of distinct window vectors, as both adapters serve it."""

    def train(self, sample: np.ndarray) -> None: ...
    def add(self, vectors: np.ndarray, first: int) -> None: ...
    def count(self) -> int: ...
    def set_probes(self, probes: int) -> None: ...
    def search(self, queries: np.ndarray, count: int) -> np.ndarray: ...
    def save(self, path: Path) -> None: ...


class EngineKind(Protocol):
    """An adapter class: a new empty index, or one saved by `EngineIndex.save` read back (`view`: memory-mapped)."""

    def __call__(self, quantize: Quantize, dim: int, windows: int) -> EngineIndex: ...
    def load(self, path: Path, quantize: Quantize, view: bool = True) -> EngineIndex: ...


def _require(engine: Engine) -> ModuleType:
    from lengthwise.core._optional import require

    module = {"faiss": "faiss", "usearch": "usearch.index"}[engine.value]
    return require(module, extra="index", field="engine", value=engine.value)


def _packbits(vectors: np.ndarray) -> np.ndarray:
    """Sign bits, packed (sentence-transformers' ``ubinary``): (n, D) float → (n, D / 8) uint8."""
    return np.packbits(vectors > 0, axis=-1)


def ivf_lists(windows: int) -> int:
    """IVF lists: about 4·√W (FAISS's guideline is 4·√W to 16·√W), at least 1."""
    return max(1, min(int(4 * np.sqrt(windows)), windows // 39 or 1))


class _Faiss:
    def __init__(self, quantize: Quantize, dim: int, windows: int) -> None:
        faiss = _require(Engine.FAISS)
        self.faiss, self.quantize, nlist = faiss, quantize, ivf_lists(windows)
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


ENGINES: dict[Engine, EngineKind] = {Engine.FAISS: _Faiss, Engine.USEARCH: _USearch}
