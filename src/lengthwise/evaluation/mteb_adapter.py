"""Run any `TextEncoder` (a plain SentenceTransformer, a TempScale'd model with query/document temperatures, …)
through mteb v2 as an ``mteb.models.EncoderProtocol``.

mteb hands the encoder a ``DataLoader`` of batches with a ``text`` column and a `prompt_type` (query, document or
None); the adapter routes queries to `encode_queries`, documents to `encode_documents` and everything else to
`encode`, and scores with cosine similarity. ``pip install mteb`` is needed only to build `mteb_model_meta`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from lengthwise.core.encoder import TextEncoder, as_encoder
from lengthwise.core.errors import DataFormatError

__all__ = ["MtebEncoder"]


def _texts(inputs: Iterable[Mapping[str, Any]]) -> list[str]:
    texts: list[str] = []
    for batch in inputs:
        if "text" not in batch:
            problem = f"mteb batch without a 'text' column (columns: {sorted(batch)}); only text tasks run"
            raise DataFormatError(None, None, problem)
        texts.extend(str(text) for text in batch["text"])
    return texts


def _side(prompt_type: object) -> str | None:
    value = getattr(prompt_type, "value", prompt_type)
    return None if value is None else str(value)


class MtebEncoder:
    """A `TextEncoder` (or `SentenceTransformer`) seen by mteb v2 as an encoder with cosine similarity."""

    def __init__(
        self,
        encoder: Any,
        *,
        name: str = "lengthwise/encoder",
        revision: str | None = None,
        embed_dim: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.encoder: TextEncoder = as_encoder(encoder)
        self.name = name
        self.revision = revision
        self.embed_dim = embed_dim
        self.max_tokens = max_tokens

    def encode(
        self,
        inputs: Iterable[Mapping[str, Any]],
        *,
        task_metadata: Any = None,
        hf_split: str = "",
        hf_subset: str = "",
        prompt_type: object = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Embed every text of the DataLoader: (n, D) float32; queries and documents use their own side."""
        texts = _texts(inputs)
        if not texts:
            return np.zeros((0, self.embed_dim or 0), dtype=np.float32)
        batch_size = int(kwargs.get("batch_size", 32))
        progress = bool(kwargs.get("show_progress_bar", False))
        side = _side(prompt_type)
        if side == "query":
            return self.encoder.encode_queries(texts, batch_size=batch_size, show_progress=progress)
        if side == "document":
            return self.encoder.encode_documents(texts, batch_size=batch_size, show_progress=progress)
        return self.encoder.encode(texts, batch_size=batch_size, show_progress=progress)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """Cosine similarity matrix: (n, D), (m, D) → (n, m)."""
        a = torch.nn.functional.normalize(torch.as_tensor(np.asarray(embeddings1), dtype=torch.float32), dim=-1)
        b = torch.nn.functional.normalize(torch.as_tensor(np.asarray(embeddings2), dtype=torch.float32), dim=-1)
        return a @ b.T

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """Cosine of matching rows: (n, D), (n, D) → (n,)."""
        a = torch.nn.functional.normalize(torch.as_tensor(np.asarray(embeddings1), dtype=torch.float32), dim=-1)
        b = torch.nn.functional.normalize(torch.as_tensor(np.asarray(embeddings2), dtype=torch.float32), dim=-1)
        return (a * b).sum(dim=-1)

    @property
    def mteb_model_meta(self) -> Any:
        """An ``mteb.models.ModelMeta`` naming the model, its revision and cosine similarity."""
        from lengthwise.core._optional import require

        ModelMeta = require("mteb.models", extra="mteb", purpose="the mteb adapter").ModelMeta
        return ModelMeta.create_empty(
            {
                "name": self.name,
                "revision": self.revision,
                "similarity_fn_name": "cosine",
                "embed_dim": self.embed_dim,
                "max_tokens": self.max_tokens,
                "framework": ["Sentence Transformers"],
            }
        )
