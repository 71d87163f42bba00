"""Embed pre-tokenized id sequences through a `SentenceTransformer`'s own modules (pooling, normalization).

Elongated and truncated inputs are built at the token level (`lengthwise.core.tokens`); this module feeds those
exact ids to the model, so nothing is ever decoded and re-tokenized.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.tokens import SpecialTokens, content_ids, special_tokens

__all__ = ["TokenView", "batch_features", "embed_ids", "embed_texts"]


class TokenView:
    """A model's tokenizer seen through `tok(S)`: special tokens, N and the content budget N - specials."""

    def __init__(self, model: SentenceTransformer) -> None:
        self.tokenizer = model.tokenizer
        self.specials: SpecialTokens = special_tokens(self.tokenizer)
        self.max_length: int = _max_length(model)
        self.max_content: int = self.max_length - self.specials.count

    def content(self, texts: Sequence[str]) -> list[list[int]]:
        """``tok(S)`` of each text, truncated to the content budget."""
        return content_ids(self.tokenizer, texts, self.max_content)

    def wrap(self, ids: Sequence[int]) -> list[int]:
        return self.specials.wrap(ids)


def _max_length(model: SentenceTransformer) -> int:
    if model.max_seq_length is None:
        raise ValueError("the model has no max sequence length; set model.max_seq_length (or pass --max-length)")
    return int(model.max_seq_length)


def batch_features(tokenizer, batch: Sequence[Sequence[int]], device: torch.device) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids`` / ``attention_mask`` (/ ``token_type_ids``) for one batch: (B, T)."""
    width = max(len(ids) for ids in batch)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(batch), width), pad, dtype=torch.long)  # (B, T)
    attention_mask = torch.zeros((len(batch), width), dtype=torch.long)  # (B, T)
    for row, ids in enumerate(batch):
        input_ids[row, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
        attention_mask[row, : len(ids)] = 1
    features = {"input_ids": input_ids, "attention_mask": attention_mask}
    if "token_type_ids" in getattr(tokenizer, "model_input_names", ()):
        features["token_type_ids"] = torch.zeros_like(input_ids)
    return {name: tensor.to(device) for name, tensor in features.items()}


def embed_ids(
    model: SentenceTransformer,
    sequences: Sequence[Sequence[int]],
    *,
    batch_size: int = 32,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Embed full model inputs (special tokens included) with the model's pooling and normalization.

    Sequences are batched longest-first to keep padding small. Returns float32 of shape (len(sequences), D).
    Raises ValueError for an empty sequence or one longer than the model's max length.
    """
    if not sequences:
        raise ValueError("no sequences to embed")
    limit = _max_length(model)
    for index, ids in enumerate(sequences):
        if not ids:
            raise ValueError(f"sequence #{index} is empty")
        if len(ids) > limit:
            raise ValueError(f"sequence #{index} has {len(ids)} tokens, more than the model's max length {limit}")
    order = np.argsort([-len(ids) for ids in sequences], kind="stable")
    tokenizer = model.tokenizer
    chunks: list[torch.Tensor] = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = [sequences[i] for i in order[start : start + batch_size]]
            out = model(batch_features(tokenizer, batch, model.device))
            chunks.append(out["sentence_embedding"].float().cpu())  # (B, D)
            if on_batch is not None:
                on_batch(len(batch))
    sorted_embeddings = torch.cat(chunks).numpy()  # (len, D) in length order
    embeddings = np.empty_like(sorted_embeddings)
    embeddings[order] = sorted_embeddings
    return embeddings


def embed_texts(
    model: SentenceTransformer,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Embed texts the way `SentenceTransformer.encode` does (truncation to N), through `embed_ids`."""
    view = TokenView(model)
    return embed_ids(model, [view.wrap(ids) for ids in view.content(texts)], batch_size=batch_size, on_batch=on_batch)
