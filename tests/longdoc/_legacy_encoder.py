"""Today's `LongEncoder` (commit d983bb0), frozen: the reference the pipeline's output must equal byte for byte in fp32.

A verbatim copy of ``src/lengthwise/longdoc/encoder.py`` at d983bb0 with `batch_features` (core/embed.py) and
`window_key` (longdoc/_cache.py) of that commit inlined, so later changes to those cannot move the reference.
Used only by tests/longdoc/test_encoder_pipeline.py.
"""

# ruff: noqa
# mypy: ignore-errors
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.encoder import MultiVectors
from lengthwise.core.models import live_patch, position_limit
from lengthwise.core.scoring import WindowScoring
from lengthwise.core.tokens import special_tokens, windows
import hashlib

from lengthwise.longdoc._cache import WindowCache
from lengthwise.longdoc.config import RECOMMENDED, LongDocConfig, LongDocError, Strategy, saved_longdoc
from lengthwise.longdoc.pooling import macro_assignment, pool_windows

__all__ = ["LegacyLongEncoder"]


def window_key(ids: Sequence[int], head: bytes = b"") -> bytes:
    return hashlib.blake2b(head + np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()


def batch_features(tokenizer, batch, device):
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


Role = str | None  # "query", "document" or None (symmetric)
_SENTENCE_END = {".", "!", "?", ";"}


@dataclass(frozen=True)
class DocumentWindows:
    """One document's window (or late-chunking chunk) vectors (k, D) and content tokens per window (k,)."""

    vectors: np.ndarray
    weights: np.ndarray


class LegacyLongEncoder:
    """A `TextEncoder` (and `MultiVectorEncoder`) reading whole documents with a `LongDocConfig` strategy.

    ``LongEncoder(model, strategy="multi-vector", window=128, stride=96)``; keyword settings override `config`
    (`LongDocConfig.updated`: another strategy starts from its plain settings, a window without a stride has no
    overlap), which defaults to the choice saved with the model (`lengthwise longdoc tune --save`), else
    `RECOMMENDED`.
    Raises `LongDocError` naming the flag when the window exceeds the model's position table or the stride
    leaves no room. An empty document raises `LongDocError` naming its index (no vector is invented for it).
    """

    def __init__(
        self,
        model: SentenceTransformer,
        config: LongDocConfig | None = None,
        *,
        cache_bytes: int = 64 * 2**20,
        cache: WindowCache | None = None,
        block_chars: int = 2_000_000,
        **settings: Any,
    ) -> None:
        self.model = model
        base = config or saved_longdoc(model) or RECOMMENDED  # the choice saved with the model, if any
        self.config = base.updated(**settings) if settings else base
        self.tokenizer = model.tokenizer
        self.specials = special_tokens(self.tokenizer)
        if model.max_seq_length is None:
            raise LongDocError("window", None, "the model has no max sequence length; set a window")
        self.limit = position_limit(model) or int(model.max_seq_length)
        self.window = self.config.window or int(model.max_seq_length)
        self.macro_window = self.config.macro_window or self.limit
        sizes = [("window", self.window), ("macro_window", self.macro_window)]
        for name, value in [*sizes, *(("scales", scale) for scale in self.config.scales)]:
            if value > self.limit:
                raise LongDocError(
                    name,
                    value,
                    f"above the model's limit of {self.limit} tokens (its position table); use ≤ {self.limit}",
                )
        if self.window <= self.specials.count:
            raise LongDocError("window", self.window, "leaves no room for text beside the special tokens")
        self.cache = cache if cache is not None else WindowCache(cache_bytes)
        self.block_chars = block_chars
        self.normalizes = any(type(module).__name__ == "Normalize" for module in model)
        self.stats = {"documents": 0, "windows": 0, "forwarded_windows": 0, "forwarded_tokens": 0}
        self._prompts: dict[Role, list[int]] = {}

    # --- the TextEncoder protocol -----------------------------------------------------------------------------

    @property
    def is_multi_vector(self) -> bool:
        return self.config.strategy is Strategy.multi_vector

    @property
    def window_scoring(self) -> WindowScoring:
        return self.config.scoring

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """Symmetric use: one vector per text, (n, D) float32 (multi-vector gives the mean of its windows)."""
        return self._pooled(texts, None, batch_size, show_progress)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._pooled(texts, "query", batch_size, show_progress)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return self._pooled(texts, "document", batch_size, show_progress)

    def encode_documents_multi(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> MultiVectors:
        """Every window vector of every document (every chunk vector for late chunking)."""
        parts = list(self.iter_windows(texts, "document", batch_size=batch_size, show_progress=show_progress))
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(part.vectors) for part in parts])
        return MultiVectors(np.concatenate([part.vectors for part in parts]).astype(np.float32), offsets)

    def _pooled(self, texts: Sequence[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        parts = self.iter_windows(texts, role, batch_size=batch_size, show_progress=show_progress)
        pooled = [pool_windows(p.vectors, p.weights, self.config.strategy, normalize=self.normalizes) for p in parts]
        if not pooled:
            raise LongDocError(None, None, "no texts to encode")
        return np.stack(pooled)

    # --- streaming -------------------------------------------------------------------------------------------

    def iter_windows(
        self,
        texts: Iterable[str],
        role: Role = "document",
        *,
        batch_size: int = 32,
        show_progress: bool = False,
        total: int | None = None,
    ) -> Iterator[DocumentWindows]:
        """The window vectors of each text in order, block by block (bounded memory for any corpus size)."""
        from tqdm.auto import tqdm

        if batch_size < 1:
            raise LongDocError("batch_size", batch_size, "must be ≥ 1")

        total = total if total is not None else (len(texts) if isinstance(texts, Sequence) else None)
        iterator = iter(texts)
        first = 0
        with tqdm(total=total, unit="doc", disable=not show_progress, desc=self.config.describe()) as bar:
            while block := self._next_block(iterator):
                for index, text in enumerate(block):
                    if not isinstance(text, str) or not text.strip():
                        raise LongDocError(
                            None,
                            None,
                            f"document #{first + index} is empty or whitespace-only; remove it or give it text",
                        )
                ids = self.tokenizer(block, add_special_tokens=False, verbose=False)["input_ids"]
                for index, doc in enumerate(ids):
                    if not doc:
                        raise LongDocError(None, None, f"document #{first + index} has no tokens for this tokenizer")
                if self.config.strategy is Strategy.late_chunking:
                    yield from self._late_block(ids, role, batch_size)
                else:
                    yield from self._window_block(ids, role, batch_size)
                first += len(block)
                self.stats["documents"] += len(block)
                bar.update(len(block))

    def _next_block(self, iterator: Iterator[str]) -> list[str]:
        block: list[str] = []
        size = 0
        for text in islice(iterator, None):
            block.append(text)
            size += len(text) if isinstance(text, str) else 0
            if size >= self.block_chars:
                break
        return block

    # --- windows ---------------------------------------------------------------------------------------------

    def _prompt(self, role: Role) -> list[int]:
        """The token ids of the model's prompt for `role` (none for most models), cached."""
        if role not in self._prompts:
            prompts = getattr(self.model, "prompts", None) or {}
            name = role if role is not None else getattr(self.model, "default_prompt_name", None)
            text = prompts.get(name, "") if name else ""
            self._prompts[role] = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
        return self._prompts[role]

    def content_budget(self, role: Role = "document", window: int | None = None) -> int:
        """Text tokens per window: the window less the special tokens and the role's prompt."""
        budget = (window or self.window) - self.specials.count - len(self._prompt(role))
        if budget < 1:
            raise LongDocError("window", window or self.window, "leaves no room for text beside the prompt")
        return budget

    def _stride(self, budget: int) -> int:
        stride = self.config.stride or budget
        if stride > budget:
            raise LongDocError(
                "stride", stride, f"larger than the {budget} text tokens a window holds; use a stride ≤ {budget}"
            )
        return stride

    def spans(self, ids: Sequence[int], role: Role = "document") -> list[tuple[int, int]]:
        """The (start, end) windows of one document's content ids under this configuration."""
        budget = self.content_budget(role)
        if self.config.strategy is Strategy.truncate:
            return [(0, min(len(ids), budget))]
        cuts = self._sentence_cuts(ids) if self.config.sentence_cuts else None
        spans = windows(len(ids), budget, self._stride(budget), cuts)
        for scale in self.config.scales:  # multi-scale: each further size cut without overlap
            scale_budget = self.content_budget(role, scale)
            spans.extend(windows(len(ids), scale_budget, scale_budget, cuts))
        return list(dict.fromkeys(spans)) if self.config.scales else spans  # a short text's windows coincide

    def _sentence_cuts(self, ids: Sequence[int]) -> list[int]:
        tokens = self.tokenizer.convert_ids_to_tokens(list(ids))
        return [i + 1 for i, token in enumerate(tokens) if token in _SENTENCE_END]

    def _wrap(self, ids: Sequence[int], role: Role) -> list[int]:
        return self.specials.wrap([*self._prompt(role), *ids])

    def _window_block(self, docs: list[list[int]], role: Role, batch_size: int) -> Iterator[DocumentWindows]:
        plans = [self.spans(ids, role) for ids in docs]
        keys = self._keys(docs, plans, role, tokens=False)
        found = self._embed_unique(docs, plans, keys, role, batch_size, tokens=False)
        for spans, doc_keys in zip(plans, keys, strict=True):
            self.stats["windows"] += len(spans)
            vectors = np.stack([found[key] for key in doc_keys])  # (k, D)
            yield DocumentWindows(vectors, np.asarray([e - s for s, e in spans], dtype=np.float32))

    def _keys(
        self, docs: list[list[int]], plans: list[list[tuple[int, int]]], role: Role, *, tokens: bool
    ) -> list[list[bytes]]:
        """Cache keys: the window's ids, with what is cached (vector / token states), the role and the live
        TempScale settings, so a changed patch or role never reuses a stale output."""
        patch = live_patch(self.model)
        state = json.dumps(patch.describe(), sort_keys=True, default=str) if patch is not None else ""
        head = f"{'tokens' if tokens else 'vector'}|{role}|{state}|".encode()
        return [[window_key(ids[s:e], head) for s, e in spans] for ids, spans in zip(docs, plans, strict=True)]

    def _embed_unique(
        self,
        docs: list[list[int]],
        plans: list[list[tuple[int, int]]],
        keys: list[list[bytes]],
        role: Role,
        batch_size: int,
        *,
        tokens: bool,
    ) -> dict[bytes, np.ndarray]:
        """Embed each distinct window of the block once (cache first): vectors (D,) or token states (T, D)."""
        found: dict[bytes, np.ndarray] = {}
        pending: dict[bytes, list[int]] = {}
        for ids, spans, doc_keys in zip(docs, plans, keys, strict=True):
            for (start, end), key in zip(spans, doc_keys, strict=True):
                if key in found or key in pending:
                    continue
                cached = self.cache.get(key)
                if cached is not None:
                    found[key] = cached
                else:
                    pending[key] = ids[start:end]
        if pending:
            outputs = self._forward([self._wrap(ids, role) for ids in pending.values()], role, batch_size, tokens)
            for key, output in zip(pending, outputs, strict=True):
                found[key] = output
                self.cache.put(key, output)
        return found

    def _forward(self, sequences: list[list[int]], role: Role, batch_size: int, tokens: bool) -> list[np.ndarray]:
        """Run the model over full inputs (special tokens included), longest first: vectors or token states."""
        order = np.argsort([-len(ids) for ids in sequences], kind="stable")
        results: list[np.ndarray] = [np.empty(0)] * len(sequences)
        kwargs = {"task": role} if role is not None else {}
        prompt = len(self._prompt(role))
        self.model.eval()
        with torch.inference_mode():
            for first in range(0, len(order), batch_size):
                rows = order[first : first + batch_size]
                batch = [sequences[i] for i in rows]
                features: dict[str, Any] = batch_features(self.tokenizer, batch, self.model.device)
                if prompt:
                    features["prompt_length"] = len(self.specials.prefix) + prompt
                out = self.model(features, **kwargs)
                self.stats["forwarded_windows"] += len(batch)
                self.stats["forwarded_tokens"] += sum(len(ids) for ids in batch)
                if tokens:
                    states = out["token_embeddings"].float().cpu().numpy()  # (B, T, D)
                    for row, index in enumerate(rows):
                        results[index] = states[row, : len(sequences[index])].copy()  # own memory: cached
                else:
                    vectors = out["sentence_embedding"].float().cpu().numpy()  # (B, D)
                    for row, index in enumerate(rows):
                        results[index] = vectors[row].copy()  # a view would keep the whole batch alive
        return results

    # --- late chunking ---------------------------------------------------------------------------------------

    def _late_block(self, docs: list[list[int]], role: Role, batch_size: int) -> Iterator[DocumentWindows]:
        macro_budget = self.content_budget(role, self.macro_window)
        macro_plans = [
            [(0, len(ids))] if len(ids) <= macro_budget else windows(len(ids), macro_budget, max(1, macro_budget // 2))
            for ids in docs
        ]
        keys = self._keys(docs, macro_plans, role, tokens=True)
        states = self._embed_unique(docs, macro_plans, keys, role, batch_size, tokens=True)
        skip = len(self.specials.prefix) + len(self._prompt(role))
        for ids, spans, doc_keys in zip(docs, macro_plans, keys, strict=True):
            assign = macro_assignment(len(ids), spans)  # (n,)
            width = states[doc_keys[0]].shape[1]
            token_states = np.empty((len(ids), width), dtype=np.float32)  # (n, D) content tokens only
            for w, ((start, _), key) in enumerate(zip(spans, doc_keys, strict=True)):
                where = np.nonzero(assign == w)[0]
                token_states[where] = states[key][skip + where - start]
            last_start, last_end = spans[-1]
            edges = (states[doc_keys[0]][:skip], states[doc_keys[-1]][skip + last_end - last_start :])
            chunks = self.spans(ids, role)
            self.stats["windows"] += len(chunks)
            yield DocumentWindows(
                self._pool_chunks(token_states, chunks, edges),
                np.asarray([e - s for s, e in chunks], dtype=np.float32),
            )

    def _pool_chunks(
        self, token_states: np.ndarray, chunks: list[tuple[int, int]], edges: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        """Each chunk's token states through the model's modules after the transformer: (C, D).

        The first chunk also takes the states of the leading special tokens (and prompt), the last chunk those
        of the trailing ones, so a document that fits one window and one chunk gets exactly the model's vector.
        """
        rows = [token_states[start:end] for start, end in chunks]
        rows[0] = np.concatenate([edges[0], rows[0]])
        rows[-1] = np.concatenate([rows[-1], edges[1]])
        width = max(len(row) for row in rows)
        padded = torch.zeros((len(rows), width, token_states.shape[1]))  # (C, L, D)
        mask = torch.zeros((len(rows), width), dtype=torch.long)  # (C, L)
        for index, row in enumerate(rows):
            padded[index, : len(row)] = torch.from_numpy(row)
            mask[index, : len(row)] = 1
        device = self.model.device
        features: dict[str, Any] = {"token_embeddings": padded.to(device), "attention_mask": mask.to(device)}
        with torch.inference_mode():
            for module in list(self.model)[1:]:
                features = module(features)
        return features["sentence_embedding"].float().cpu().numpy()
