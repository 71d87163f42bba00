"""`TextEncoder`: what every evaluator needs from a model, and the plain `SentenceTransformer` adapter.

Evaluators take anything that satisfies the protocol, so a TempScale'd model (with separate query and
document temperatures) or an mteb-style wrapper plugs in without the evaluators knowing about it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.errors import SettingError
from lengthwise.core.parallel import each
from lengthwise.core.scoring import WindowScoring

__all__ = [
    "MultiVectorEncoder",
    "MultiVectors",
    "SentenceTransformerEncoder",
    "TextEncoder",
    "as_encoder",
    "multi_vector_scores",
    "row_products",
]


@runtime_checkable
class TextEncoder(Protocol):
    """Anything that turns texts into (n, D) float32 embeddings, symmetric or as queries / documents."""

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """Symmetric use (STS, classification, clustering)."""
        ...

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """The query side of retrieval."""
        ...

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        """The document side of retrieval."""
        ...


@dataclass(frozen=True)
class MultiVectors:
    """Several vectors per document (one per window): `vectors` (W, D) float32, grouped by document in order;
    document i owns rows ``offsets[i]:offsets[i + 1]`` of `offsets` (n + 1,) int64, and owns at least one."""

    vectors: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        if self.offsets.ndim != 1 or self.offsets[0] != 0 or self.offsets[-1] != len(self.vectors):
            raise SettingError("offsets", self.offsets.shape, "must run from 0 to the number of vectors")
        if np.any(np.diff(self.offsets) < 1):
            raise SettingError("offsets", self.offsets.shape, "every document needs at least one vector")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def owner(self) -> np.ndarray:
        """The document index of each vector: (W,) int64."""
        return np.repeat(np.arange(len(self)), np.diff(self.offsets))


ROW_BLOCK = 2048  # rows of the matrix `row_products` reads at a time: a block stays in cache for every query


def row_products(queries: torch.Tensor, matrix: torch.Tensor, pool: Executor | None = None) -> torch.Tensor:
    """``queries @ matrix.T`` (Q, D) × (W, D) → (Q, W), each query row its own product over blocks of `ROW_BLOCK`
    rows of `matrix`: a row's bits never depend on the other queries (those of one (Q, D) × (D, W) product do), and
    each block is read from memory once for all of them. With `pool`, the blocks are spread over its threads."""
    out = torch.empty((queries.shape[0], matrix.shape[0]), dtype=torch.float32)

    def block(start: int) -> None:
        part = matrix[start : start + ROW_BLOCK].T  # (D, B)
        for row in range(queries.shape[0]):
            torch.mm(queries[row : row + 1], part, out=out[row : row + 1, start : start + ROW_BLOCK])

    each(pool, block, range(0, matrix.shape[0], ROW_BLOCK))
    return out


def multi_vector_scores(
    queries: torch.Tensor,
    documents: MultiVectors,
    scoring: WindowScoring | int = 1,
    *,
    unit: bool = False,
    products: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Exact late-interaction scores: (Q, D) unit queries × multi-vector documents → (Q, n).

    A document scores the max cosine over its vectors, the mean of its `best_windows` best, and/or that fused with
    its mean-of-windows cosine, as `scoring` says (an int is a `best_windows`). Vectors are L2-normalised here, unless
    `unit` says they are already (an index's stored vectors: normalising them again costs a search a fifth of its time).
    `products(queries, vectors)` makes the (Q, W) cosines (default ``queries @ vectors.T``, one matrix product;
    `row_products` gives each query its own, so its scores are the same bits in a batch of any size).
    """
    products = products or _one_product
    scoring = WindowScoring.of(scoring)
    if isinstance(documents.vectors, np.ndarray) and not documents.vectors.flags.writeable:
        with warnings.catch_warnings():  # an index's memory map (exact scans): read here, never written
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            vectors = torch.as_tensor(documents.vectors, dtype=torch.float32)
    else:  # the search path (gathered rows): no change to the process-wide warning filters
        vectors = torch.as_tensor(documents.vectors, dtype=torch.float32)
    if not unit:
        vectors = torch.nn.functional.normalize(vectors, dim=-1)
    sims = products(queries, vectors)  # (Q, W)
    owner = torch.as_tensor(documents.owner())
    n = len(documents)
    if scoring.best_windows == 1:
        out = torch.full((queries.shape[0], n), float("-inf"))
        window = out.scatter_reduce(1, owner.expand_as(sims), sims, reduce="amax")  # (Q, n)
    else:
        counts = torch.as_tensor(np.diff(documents.offsets))  # (n,)
        width = int(counts.max())
        slot = torch.arange(len(owner)) - torch.as_tensor(documents.offsets[:-1])[owner]  # position within its doc
        padded = torch.full((queries.shape[0], n, width), float("-inf"))
        padded[:, owner, slot] = sims  # (Q, n, width)
        k = min(scoring.best_windows, width)
        best = padded.topk(k, dim=-1).values  # (Q, n, k)
        taken = torch.clamp(counts, max=k).to(best.dtype)  # (n,)
        window = torch.where(torch.isinf(best), torch.zeros_like(best), best).sum(-1) / taken
    if scoring.fuse_mean == 0.0:
        return window
    means = torch.zeros((n, vectors.shape[1])).index_add_(0, owner, vectors)  # (n, D) sums of unit windows
    pooled = torch.nn.functional.normalize(means, dim=-1)  # the chunk-mean document vectors
    mean = products(queries, pooled)  # (Q, n)
    return (1.0 - scoring.fuse_mean) * window + scoring.fuse_mean * mean


def _one_product(queries: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    return queries @ vectors.T


@runtime_checkable
class MultiVectorEncoder(TextEncoder, Protocol):
    """A `TextEncoder` that can also keep several vectors per document; retrieval then ranks with
    `multi_vector_scores` under its `window_scoring` when `is_multi_vector` is true."""

    is_multi_vector: bool
    window_scoring: WindowScoring

    def encode_documents_multi(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> MultiVectors:
        """Every window vector of every document."""
        ...


@dataclass
class SentenceTransformerEncoder:
    """A `SentenceTransformer` as a `TextEncoder`; queries/documents use its `encode_query`/`encode_document`
    (so the model's own query/document prompts apply, as in MTEB)."""

    model: SentenceTransformer

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._run(self.model.encode, "encode", texts, batch_size, show_progress)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._run(self.model.encode_query, "encode queries", texts, batch_size, show_progress)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return self._run(self.model.encode_document, "encode documents", texts, batch_size, show_progress)

    @staticmethod
    def _run(
        method: Callable[..., object], name: str, texts: Sequence[str], batch_size: int, show_progress: bool
    ) -> np.ndarray:
        """`method` (the model's encode) on every text at once, its progress shown as `show_progress` asks: the
        model's own bar on a terminal, progress lines elsewhere (`st_progress_lines`)."""
        from lengthwise.core.progress import progress_mode, st_progress_lines

        texts = list(texts)
        if progress_mode(show_progress) != "lines":
            return _as_array(method(texts, batch_size=batch_size, show_progress_bar=show_progress))
        with st_progress_lines(name, len(texts), batch_size):
            return _as_array(method(texts, batch_size=batch_size, show_progress_bar=True))


def _as_array(embeddings: object) -> np.ndarray:
    return np.asarray(embeddings, dtype=np.float32)


def as_encoder(model: SentenceTransformer | TextEncoder) -> TextEncoder:
    """Wrap a `SentenceTransformer`; pass a `TextEncoder` through unchanged."""
    if isinstance(model, SentenceTransformer):
        return SentenceTransformerEncoder(model)
    if isinstance(model, TextEncoder):
        return model
    raise TypeError(f"{type(model).__name__} is neither a SentenceTransformer nor a TextEncoder")
