"""`TextEncoder`: what every evaluator needs from a model, and the plain `SentenceTransformer` adapter.

Evaluators take anything that satisfies the protocol, so a TempScale'd model (with separate query and
document temperatures) or an mteb-style wrapper plugs in without the evaluators knowing about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from sentence_transformers import SentenceTransformer

__all__ = ["SentenceTransformerEncoder", "TextEncoder", "as_encoder"]


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


@dataclass
class SentenceTransformerEncoder:
    """A `SentenceTransformer` as a `TextEncoder`; queries/documents use its `encode_query`/`encode_document`
    (so the model's own query/document prompts apply, as in MTEB)."""

    model: SentenceTransformer

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return _as_array(self.model.encode(list(texts), batch_size=batch_size, show_progress_bar=show_progress))

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return _as_array(self.model.encode_query(list(texts), batch_size=batch_size, show_progress_bar=show_progress))

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return _as_array(
            self.model.encode_document(list(texts), batch_size=batch_size, show_progress_bar=show_progress)
        )


def _as_array(embeddings: object) -> np.ndarray:
    return np.asarray(embeddings, dtype=np.float32)


def as_encoder(model: SentenceTransformer | TextEncoder) -> TextEncoder:
    """Wrap a `SentenceTransformer`; pass a `TextEncoder` through unchanged."""
    if isinstance(model, SentenceTransformer):
        return SentenceTransformerEncoder(model)
    if isinstance(model, TextEncoder):
        return model
    raise TypeError(f"{type(model).__name__} is neither a SentenceTransformer nor a TextEncoder")
