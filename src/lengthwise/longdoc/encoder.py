"""`LongEncoder`: any `SentenceTransformer` reading texts longer than its window whole (METHODS §5).

It composes the model: windows are cut at the token level (`lengthwise.core.tokens.windows`), wrapped once in the
model's special tokens (and its prompt for the role, if any) and sent through ``model(features, task=role)``, so
the model's own pooling and normalisation apply and a TempScale patch sees the role (query / document) exactly as
with ``encode_query`` / ``encode_document``. Late chunking runs the transformer over macro-windows up to the
position limit and pools each chunk's token states with the model's modules after the transformer.

Cost is linear in tokens: documents are read in blocks, the windows of a whole block are batched together sorted
by length, and identical windows (a byte-bounded LRU cache) are embedded once. A block's outputs are handed on
before the next block is read, so `iter_windows` streams a corpus of any size in bounded memory. Reading and
tokenizing run in a thread ahead of the forward, windows are offsets into one numpy array of the block's ids, and
full-width batches go to the model while later pieces are still being tokenized (`lengthwise.longdoc._pipeline`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from itertools import chain, islice
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.embed import HostCopy, WindowBatches, eval_mode
from lengthwise.core.encoder import MultiVectors
from lengthwise.core.forwards import forward_once
from lengthwise.core.models import live_patch, position_limit
from lengthwise.core.scoring import WindowScoring
from lengthwise.core.tokens import special_tokens, windows
from lengthwise.longdoc._cache import WindowCache
from lengthwise.longdoc._pipeline import BlockWindows, padded_widths, prefetch, window_spans
from lengthwise.longdoc.config import RECOMMENDED, LongDocConfig, LongDocError, Strategy, saved_longdoc
from lengthwise.longdoc.pooling import macro_assignment, pool_windows

__all__ = ["DocumentWindows", "LongEncoder"]

Role = str | None  # "query", "document" or None (symmetric)
_SENTENCE_END = {".", "!", "?", ";"}
_Doc = tuple[int, int, np.ndarray, np.ndarray, np.ndarray]  # a document of a block: offset, tokens, rows, starts, ends
_PIECE_CHARS = 32_000  # characters tokenized per call by the reader thread: small enough to overlap the forward
_QUERY_BUCKET = 8  # on a CPU, a query window is padded to the next multiple of 8 tokens (`padded_batches`)
_GPU_TOKENS_PER_BATCH = 131_072  # tokens per forward on a GPU unless set: 4,096 windows of 32 tokens


@dataclass(frozen=True)
class DocumentWindows:
    """One document's window (or late-chunking chunk) vectors (k, D) and content tokens per window (k,)."""

    vectors: np.ndarray
    weights: np.ndarray


class LongEncoder:
    """A `TextEncoder` (and `MultiVectorEncoder`) reading whole documents with a `LongDocConfig` strategy.

    ``LongEncoder(model, strategy="multi-vector", window=128, stride=96)``; keyword settings override `config`
    (`LongDocConfig.updated`: another strategy starts from its plain settings, a window without a stride has no
    overlap), which defaults to the choice saved with the model (`lengthwise longdoc tune --save`), else
    `RECOMMENDED`.
    `tokens_per_batch` sizes batches by tokens on a GPU (default 131,072 there: 4,096 windows of 32 tokens; the
    `batch_size` of each call is a floor); on a CPU it is off unless set, and batches hold `batch_size` windows.
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
        tokens_per_batch: int | None = None,
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
        self.tokens_per_batch = tokens_per_batch
        self._ends: np.ndarray | None = None
        self.normalizes = any(type(module).__name__ == "Normalize" for module in model)
        self.stats = {"documents": 0, "windows": 0, "forwarded_windows": 0, "forwarded_tokens": 0}
        self._prompts: dict[Role, list[int]] = {}
        self.on_forward: Callable[[], None] | None = None  # told after each batch of windows (`block_progress`)
        self._block: BlockWindows | None = None  # the block being embedded, and its documents read so far
        self._block_docs = 0

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
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        show_progress: bool = False,
        on_document: Callable[[], None] | None = None,
    ) -> np.ndarray:
        """One pooled vector per document; `on_document` is called after each document is embedded."""
        return self._pooled(texts, "document", batch_size, show_progress, on_document)

    def encode_documents_multi(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        show_progress: bool = False,
        on_document: Callable[[], None] | None = None,
    ) -> MultiVectors:
        """Every window vector of every document (every chunk vector for late chunking); `on_document` is called
        after each document is embedded."""
        parts = list(_counted(self.iter_windows(texts, "document", batch_size=batch_size, show_progress=show_progress),
                              on_document))  # fmt: skip
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(part.vectors) for part in parts])
        return MultiVectors(np.concatenate([part.vectors for part in parts]).astype(np.float32), offsets)

    def _pooled(
        self,
        texts: Sequence[str],
        role: Role,
        batch_size: int,
        show_progress: bool,
        on_document: Callable[[], None] | None = None,
    ) -> np.ndarray:
        parts = _counted(
            self.iter_windows(texts, role, batch_size=batch_size, show_progress=show_progress), on_document
        )
        pooled = [pool_windows(p.vectors, p.weights, self.config.strategy, normalize=self.normalizes) for p in parts]
        if not pooled:
            raise LongDocError(None, None, "no texts to encode")
        return np.stack(pooled)

    def block_progress(self) -> float:
        """Documents of the block being embedded whose share is done: the block's documents read so far times the
        share of its distinct windows forwarded or found in the cache (a block of long documents takes minutes on a
        CPU, and its documents come out only when it ends: a progress line moves with this meanwhile)."""
        block = self._block
        if block is None or not block.index:
            return 0.0
        return self._block_docs * min((len(block.hits) + block.forwarded) / len(block.index), 1.0)

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
        """The window vectors of each text in order, block by block (bounded memory for any corpus size).

        Reading and tokenizing run in a thread a few pieces ahead of the forward (`lengthwise.longdoc._pipeline`).
        On a GPU a batch holds at least `tokens_per_batch` tokens of windows (`batch_size` is then a floor).
        """
        from lengthwise.core.progress import progress_bar, progress_mode

        if batch_size < 1:
            raise LongDocError("batch_size", batch_size, "must be ≥ 1")
        total = total if total is not None else (len(texts) if isinstance(texts, Sequence) else None)
        late = self.config.strategy is Strategy.late_chunking
        full = self.content_budget(role, self.macro_window) if late else self._full_width(role)
        self._sentence_ends()  # the tokenizer's last use on this thread while the reader runs
        pieces = prefetch(self._pieces(iter(texts)))
        eval_mode(self.model)
        bucket = self._bucket(role)
        forward = partial(self._forward_windows, role=role, tokens=late, batches=self._window_batches(role),
                          bucket=None if bucket is None else (bucket, full))  # fmt: skip
        with (
            closing(pieces),
            progress_bar(self.config.describe(), total, progress_mode(show_progress)) as bar,
        ):
            while True:
                block = BlockWindows(head=self._head(role, late), cache=self.cache, full=full, tokens=late,
                                     batch_size=self._batch_windows(batch_size, full + self._extra(role), role),
                                     forward=forward, extra=self._extra(role),
                                     bucket=bucket)  # fmt: skip
                docs: list[_Doc] = []
                self._block, self._block_docs = block, 0
                try:
                    self._read_block(pieces, block, role, docs)
                    if not docs:
                        return
                    table = block.finish()
                finally:
                    self._block = None
                yield from self._late_outputs(docs, block, table, role) if late else self._outputs(docs, table)
                self.stats["documents"] += len(docs)
                bar.update(len(docs))

    def _next_block(self, iterator: Iterator[str]) -> list[str]:
        block: list[str] = []
        size = 0
        for text in islice(iterator, None):
            block.append(text)
            size += len(text) if isinstance(text, str) else 0
            if size >= self.block_chars:
                break
        return block

    def _pieces(self, iterator: Iterator[str]) -> Iterator[tuple[np.ndarray, np.ndarray] | None]:
        """Blocks of texts checked, then tokenized a piece at a time: (flat ids, ids per text); None ends a block."""
        first = 0
        while block := self._next_block(iterator):
            for index, text in enumerate(block):
                if not isinstance(text, str) or not text.strip():
                    raise LongDocError(
                        None, None, f"document #{first + index} is empty or whitespace-only; remove it or give it text"
                    )
            start = 0
            while start < len(block):
                end, size = start + 1, len(block[start])
                while end < len(block) and size < _PIECE_CHARS:
                    size, end = size + len(block[end]), end + 1
                ids = self.tokenizer(block[start:end], add_special_tokens=False, verbose=False)["input_ids"]
                lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
                if not lengths.all():
                    empty = first + start + int(np.argmin(lengths))
                    raise LongDocError(None, None, f"document #{empty} has no tokens for this tokenizer")
                yield np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum())), lengths
                start = end
            yield None
            first += len(block)

    def _read_block(
        self, pieces: Iterator[tuple[np.ndarray, np.ndarray] | None], block: BlockWindows, role: Role, docs: list[_Doc]
    ) -> None:
        """Register the next block's windows a piece at a time, appending to `docs` per document (offset, tokens,
        rows, starts, ends)."""
        late = self.config.strategy is Strategy.late_chunking
        for piece in pieces:
            if piece is None:
                break
            flat, lengths = piece
            base = block.add_ids(flat)
            local = np.zeros(len(lengths), dtype=np.int64)  # each document's first id in the piece
            np.cumsum(lengths[:-1], out=local[1:])
            spans = [self._macro_spans(n, role) if late else self._span_arrays(flat[at : at + n], role)
                     for at, n in zip(local.tolist(), lengths.tolist(), strict=True)]  # fmt: skip
            counts = np.fromiter((len(starts) for starts, _ in spans), dtype=np.int64, count=len(spans))
            shift = np.repeat(local + base, counts)  # (windows,) their document's offset in the block
            starts, ends = (np.concatenate(column) + shift for column in zip(*spans, strict=True))
            self._block_docs += len(lengths)  # before their windows go: `block_progress` during the piece's batches
            rows = block.add(starts, ends, whole=np.repeat(counts == 1, counts))
            split = np.split(rows, np.cumsum(counts)[:-1])  # one registration for the piece, rows per document
            for at, n, (starts, ends), doc_rows in zip(local.tolist(), lengths.tolist(), spans, split, strict=True):
                docs.append((base + at, n, doc_rows, starts, ends))

    def _outputs(self, docs: list[_Doc], table: Any) -> Iterator[DocumentWindows]:
        for _, _, rows, starts, ends in docs:
            self.stats["windows"] += len(rows)
            yield DocumentWindows(table[rows], (ends - starts).astype(np.float32))  # (k, D): a gather, own memory

    # --- windows ---------------------------------------------------------------------------------------------

    def _prompt(self, role: Role) -> list[int]:
        """The token ids of the model's prompt for `role` (none for most models), cached."""
        if role not in self._prompts:
            prompts = getattr(self.model, "prompts", None) or {}
            name = role if role is not None else getattr(self.model, "default_prompt_name", None)
            text = prompts.get(name, "") if name else ""
            self._prompts[role] = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
        return self._prompts[role]

    def _extra(self, role: Role) -> int:
        """Tokens a window carries beside its content: the special tokens and the role's prompt."""
        return self.specials.count + len(self._prompt(role))

    def content_budget(self, role: Role = "document", window: int | None = None) -> int:
        """Text tokens per window: the window less the special tokens and the role's prompt."""
        budget = (window or self.window) - self.specials.count - len(self._prompt(role))
        if budget < 1:
            raise LongDocError("window", window or self.window, "leaves no room for text beside the prompt")
        return budget

    def _full_width(self, role: Role) -> int:
        """The most content tokens a window of this configuration holds (the main size or a larger scale)."""
        if self.config.strategy is Strategy.truncate:
            return self.content_budget(role)
        return max([self.content_budget(role), *(self.content_budget(role, scale) for scale in self.config.scales)])

    def _batch_windows(self, batch_size: int, width: int, role: Role = None) -> int:
        """Windows per forward: `batch_size`, raised on a GPU to fill `tokens_per_batch` tokens of full windows; one
        for queries in half precision on a CPU: its bf16 products change their blocking with the row count above 32
        rows (measured on an Intel Xeon with AMX: a query alone and in a batch of 8 differed by up to 1e-3), so each
        query is its own forward there and its vector does not depend on its batch-mates (`_bucket`)."""
        if self._bucket(role) is not None and next(self.model.parameters()).dtype in (torch.bfloat16, torch.float16):
            return 1
        budget = self.tokens_per_batch
        if budget is None:
            budget = _GPU_TOKENS_PER_BATCH if self.model.device.type == "cuda" else 0
        return max(batch_size, budget // max(width, 1))

    def _bucket(self, role: Role) -> int | None:
        """The padding bucket of `role`'s windows (`padded_batches`): queries' on a CPU, so that a query's vector
        depends on its own text alone, not on what else is in its batch (a service batches its requests), in every
        precision; and a batch of mixed-length queries pads little. On a GPU batches are not cut (its kernels may
        also change with the row count: not measured), and documents keep their batches (their bytes unchanged)."""
        return _QUERY_BUCKET if role == "query" and self.model.device.type == "cpu" else None

    def _stride(self, budget: int) -> int:
        stride = self.config.stride or budget
        if stride > budget:
            raise LongDocError(
                "stride", stride, f"larger than the {budget} text tokens a window holds; use a stride ≤ {budget}"
            )
        return stride

    def spans(self, ids: Sequence[int] | np.ndarray, role: Role = "document") -> list[tuple[int, int]]:
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

    def _span_arrays(self, ids: np.ndarray, role: Role) -> tuple[np.ndarray, np.ndarray]:
        """`spans` as (starts, ends) arrays, cut with numpy in the plain strided case."""
        if self.config.strategy is not Strategy.truncate and not self.config.sentence_cuts and not self.config.scales:
            budget = self.content_budget(role)
            return window_spans(len(ids), budget, self._stride(budget))
        spans = np.asarray(self.spans(ids, role), dtype=np.int64).reshape(-1, 2)
        return spans[:, 0], spans[:, 1]

    def _sentence_ends(self) -> np.ndarray:
        """The ids of the tokens that end a sentence (``.``, ``!``, ``?``, ``;``), read once from the vocabulary."""
        if self._ends is None:
            vocabulary = self.tokenizer.get_vocab() if self.config.sentence_cuts else {}
            ends = sorted(i for token, i in vocabulary.items() if token in _SENTENCE_END)
            self._ends = np.asarray(ends, dtype=np.int64)
        return self._ends

    def _sentence_cuts(self, ids: Sequence[int] | np.ndarray) -> list[int]:
        ends = np.isin(np.asarray(ids, dtype=np.int64), self._sentence_ends())
        return (np.flatnonzero(ends) + 1).tolist()

    def _head(self, role: Role, tokens: bool) -> bytes:
        """The start of every cache key: what is cached (vector / token states), the role and the live TempScale
        settings, so a changed patch or role never reuses a stale output (`window_key`)."""
        patch = live_patch(self.model)
        state = json.dumps(patch.describe(), sort_keys=True, default=str) if patch is not None else ""
        return f"{'tokens' if tokens else 'vector'}|{role}|{state}|".encode()

    def _window_batches(self, role: Role) -> WindowBatches:
        """The features of this encode's batches: windows wrapped in the special tokens and the role's prompt."""
        prefix = [*self.specials.prefix, *self._prompt(role)]
        return WindowBatches(self.tokenizer, prefix=prefix, suffix=self.specials.suffix, device=self.model.device)

    def _forward_windows(
        self,
        ids: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        *,
        role: Role,
        tokens: bool,
        batches: WindowBatches | None = None,
        bucket: tuple[int, int] | None = None,
    ) -> HostCopy | list[np.ndarray]:
        """Run the model over windows ``ids[start : start + length]`` wrapped in the special tokens and prompt: the
        vectors (B, D) on their way to the host (read when the block ends, so a GPU is not waited for between
        batches), or each window's token states. With `bucket` (a multiple and the widest content) the windows,
        all of one padded width (`padded_batches`), are padded to that width."""
        batches = batches if batches is not None else self._window_batches(role)
        width = None
        if bucket is not None:
            extra = self._extra(role)
            width = int(padded_widths(lengths.max(keepdims=True) + extra, bucket[0], bucket[1] + extra)[0]) - extra
        features: dict[str, Any] = batches(ids, starts, lengths, width=width)
        if self._prompt(role):
            features["prompt_length"] = len(self.specials.prefix) + len(self._prompt(role))
        with torch.inference_mode():
            out = forward_once(self.model, features, **({"task": role} if role is not None else {}))
            self.stats["forwarded_windows"] += len(lengths)
            self.stats["forwarded_tokens"] += int(lengths.sum()) + len(lengths) * self._extra(role)
            if self.on_forward is not None:  # the batch's rows are recorded once this returns: told a batch late
                self.on_forward()
            if not tokens:
                return HostCopy(out["sentence_embedding"].float())  # (B, D)
            states = out["token_embeddings"].float().cpu().numpy()  # (B, T, D)
        sizes = (lengths + self._extra(role)).tolist()
        return [states[row, :size].copy() for row, size in enumerate(sizes)]  # own memory: cached

    # --- late chunking ---------------------------------------------------------------------------------------

    def _macro_spans(self, length: int, role: Role) -> tuple[np.ndarray, np.ndarray]:
        """The macro-windows of a document of `length` tokens: one if it fits, else half-overlapping ones."""
        budget = self.content_budget(role, self.macro_window)
        return window_spans(length, budget, budget if length <= budget else max(1, budget // 2))

    def _late_outputs(
        self, docs: list[_Doc], block: BlockWindows, states: Any, role: Role
    ) -> Iterator[DocumentWindows]:
        skip = len(self.specials.prefix) + len(self._prompt(role))
        for offset, length, rows, starts, ends in docs:
            spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
            assign = macro_assignment(length, spans)  # (n,)
            width = states[rows[0]].shape[1]
            token_states = np.empty((length, width), dtype=np.float32)  # (n, D) content tokens only
            for w, (start, _) in enumerate(spans):
                where = np.nonzero(assign == w)[0]
                token_states[where] = states[rows[w]][skip + where - start]
            last_start, last_end = spans[-1]
            edges = (states[rows[0]][:skip], states[rows[-1]][skip + last_end - last_start :])
            chunks = self.spans(block.ids.array[offset : offset + length], role)
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


def _counted(parts: Iterator[DocumentWindows], on_document: Callable[[], None] | None) -> Iterator[DocumentWindows]:
    """`parts` as they come, `on_document` called after each (a progress bar that moves with the forward)."""
    for part in parts:
        yield part
        if on_document is not None:
            on_document()
