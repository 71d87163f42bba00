"""Embed pre-tokenized id sequences through a `SentenceTransformer`'s own modules (pooling, normalization).

Elongated and truncated inputs are built at the token level (`lengthwise.core.tokens`); this module feeds those
exact ids to the model, so nothing is ever decoded and re-tokenized.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.errors import SettingError
from lengthwise.core.tokens import SpecialTokens, content_ids, special_tokens

__all__ = [
    "ForwardBatch",
    "HostCopy",
    "TokenView",
    "WindowBatches",
    "batch_features",
    "embed_ids",
    "embed_side",
    "embed_texts",
    "eval_mode",
    "forward_batches",
    "text_transformer",
    "to_device",
    "window_features",
]


class TokenView:
    """A model's tokenizer seen through `tok(S)`: special tokens, N and the content budget N - specials."""

    def __init__(self, model: SentenceTransformer) -> None:
        self.tokenizer = model.tokenizer
        self.specials: SpecialTokens = special_tokens(self.tokenizer)
        self.max_length: int = _max_length(model)
        self.max_content: int = self.max_length - self.specials.count
        if self.max_content < 1:
            raise SettingError(
                "max_length",
                self.max_length,
                f"leaves no content token (the model adds {self.specials.count} special tokens); use at least "
                f"{self.specials.count + 1}",
            )

    def content(self, texts: Sequence[str], names: Sequence[str] | None = None) -> list[list[int]]:
        """``tok(S)`` of each text, truncated to the content budget; `names` name the texts in errors."""
        return content_ids(self.tokenizer, texts, self.max_content, names)

    def wrap(self, ids: Sequence[int]) -> list[int]:
        return self.specials.wrap(ids)


def _max_length(model: SentenceTransformer) -> int:
    if model.max_seq_length is None:
        raise SettingError("max_length", None, "the model has no max sequence length; set model.max_seq_length")
    return int(model.max_seq_length)


def batch_features(
    tokenizer, batch: Sequence[Sequence[int] | np.ndarray], device: torch.device
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids`` / ``attention_mask`` (/ ``token_type_ids``) for one batch: (B, T).

    Built in numpy (no per-row tensor), pinned and copied without blocking on a GPU (`to_device`).
    """
    lengths = np.fromiter((len(ids) for ids in batch), dtype=np.int64, count=len(batch))  # (B,)
    flat = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in batch])  # all ids, row after row
    starts = np.zeros(len(batch), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return window_features(tokenizer, flat, starts, lengths, device=device)


def window_features(
    tokenizer,
    ids: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    *,
    prefix: Sequence[int] = (),
    suffix: Sequence[int] = (),
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """Model features for rows ``prefix + ids[start : start + length] + suffix``, right-padded: (B, T).

    One numpy gather for the whole batch (no Python per row or per token), so a block's windows, held as offsets
    into one id array, become a batch without building lists. `WindowBatches` does the same for many batches.
    """
    return WindowBatches(tokenizer, prefix=prefix, suffix=suffix, device=device)(ids, starts, lengths)


class WindowBatches:
    """`window_features` for batch after batch of one encode: what every batch shares is read once.

    The pad id, the rows' wrap (prefix and suffix), whether the model takes token type ids and the device are
    read when it is made, so a batch costs a handful of numpy calls (a forward's Python leaves numpy's code cold,
    so each call counts): one template row repeated, one gather of the content, the mask.
    """

    def __init__(
        self, tokenizer, *, prefix: Sequence[int] = (), suffix: Sequence[int] = (), device: torch.device | str = "cpu"
    ) -> None:
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.prefix = np.asarray(prefix, dtype=np.int64)
        self.suffix = np.asarray(suffix, dtype=np.int64)
        self.types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
        self.device = torch.device(device)
        self._shapes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _shape(self, longest: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For content `longest` tokens wide: the row of a full window, the row of padding, the content columns."""
        shape = self._shapes.get(longest)
        if shape is None:
            pads = np.full(longest, self.pad, dtype=np.int64)
            full = np.concatenate([self.prefix, pads, self.suffix])  # (T,)
            empty = np.concatenate([self.prefix, pads, np.full(len(self.suffix), self.pad, dtype=np.int64)])
            shape = self._shapes[longest] = (full, empty, np.arange(longest, dtype=np.int64))
        return shape

    def __call__(
        self, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int | None = None
    ) -> dict[str, torch.Tensor]:
        """Features of rows ``ids[start : start + length]`` wrapped: input_ids, attention_mask (, token_type_ids);
        the content padded to the longest row, or to `width` columns when that is wider."""
        head, count, longest = len(self.prefix), len(lengths), max(int(lengths.max()), width or 0)
        full, empty, columns = self._shape(longest)
        source = starts[:, None] + columns  # (B, L) each content token's position in ids
        if int(lengths.min()) == longest:  # every row full (most batches): the full row, the content gathered in
            input_ids = np.repeat(full[None], count, axis=0)  # (B, T)
            input_ids[:, head : head + longest] = ids[source]
            attention_mask = torch.ones((count, len(full)), dtype=torch.int64)
        else:
            input_ids = np.repeat(empty[None], count, axis=0)
            inside = columns < lengths[:, None]  # (B, L)
            input_ids[:, head : head + longest] = np.where(inside, ids[np.where(inside, source, 0)], self.pad)
            rows = np.arange(count)
            for offset, token in enumerate(self.suffix.tolist()):
                input_ids[rows, head + lengths + offset] = token
            totals = lengths + head + len(self.suffix)  # (B,)
            attention_mask = torch.from_numpy((np.arange(len(full)) < totals[:, None]).astype(np.int64))
        features = {"input_ids": torch.from_numpy(input_ids), "attention_mask": attention_mask}
        if self.types:
            features["token_type_ids"] = torch.zeros((count, len(full)), dtype=torch.int64)
        if self.device.type == "cpu":
            return features
        return {name: to_device(tensor, self.device) for name, tensor in features.items()}


def to_device(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """`tensor` on `device`; to a GPU through pinned memory without blocking (the copy overlaps the host's work)."""
    target = torch.device(device)
    if target.type == "cuda":
        return tensor.pin_memory().to(target, non_blocking=True)
    return tensor.to(target)


class HostCopy:
    """A forward's output on its way to the host, read with `numpy()`.

    On a GPU the copy goes into pinned memory without blocking, queued behind the forward that made the tensor, so
    the host prepares the next batch while the device still computes this one; `numpy()` waits for that copy alone.
    On the CPU it is the tensor itself (no copy); on another device, a plain copy.
    """

    def __init__(self, tensor: torch.Tensor) -> None:
        self.event: Any = None
        if tensor.device.type == "cuda":
            self.tensor = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            self.tensor.copy_(tensor, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()  # on the current stream, after the copy
        else:
            self.tensor = tensor.cpu()

    def numpy(self) -> np.ndarray:
        if self.event is not None:
            self.event.synchronize()
            self.event = None
        return self.tensor.numpy()


@dataclass
class ForwardBatch:
    """One forward pass of `forward_batches`: which inputs, their lengths, pooled embeddings and (if asked) the
    per-layer tensors of the Hugging Face model. `pooled` is read from the device when first asked for, so a
    caller that keeps the batches and reads them at the end lets a GPU run ahead (`embed_ids`)."""

    index: np.ndarray  # (B,) positions in the input list
    lengths: list[int]  # (B,) real tokens per row
    mask: torch.Tensor  # (B, T) attention mask
    vectors: HostCopy  # (B, D) float32, the model's own pooling and normalisation
    hidden: tuple[torch.Tensor, ...] = ()  # L + 1 tensors (B, T, D) when asked; layer 0 is the embedding layer
    attentions: tuple[torch.Tensor, ...] = ()  # L tensors (B, H, T, T) when asked

    @property
    def pooled(self) -> np.ndarray:
        """The pooled embeddings on the host: (B, D) float32."""
        return self.vectors.numpy()


def text_transformer(model: SentenceTransformer) -> Any:
    """The Hugging Face model inside `model`; `SettingError` unless model[0] is a plain text Transformer."""
    text = (getattr(model[0], "modality_config", None) or {}).get("text", {})
    output = text.get("method_output_name", "last_hidden_state")
    plain = text.get("method", "forward") == "forward" and output in ("last_hidden_state", ("last_hidden_state",))
    if not hasattr(model[0], "auto_model") or not plain:
        raise SettingError(
            "model",
            type(model[0]).__name__,
            "per-layer states need a first module that is a Hugging Face text Transformer",
        )
    return model[0].auto_model


def _check_sequences(model: SentenceTransformer, sequences: Sequence[Sequence[int] | np.ndarray]) -> None:
    if not len(sequences):
        raise SettingError("sequences", [], "no sequences to embed")
    limit = _max_length(model)
    for index, ids in enumerate(sequences):
        if not len(ids):
            raise SettingError(f"sequences[{index}]", [], "is empty")
        if len(ids) > limit:
            raise SettingError(f"len(sequences[{index}])", len(ids), f"more than the model's max length {limit}")


def eval_mode(model: torch.nn.Module) -> None:
    """Put `model` in inference mode (dropout off) unless every module is there already: `Module.eval()` sets the
    flag on each of its modules one by one, most of a millisecond for all-MiniLM-L6-v2, which a served query paid on
    every call."""
    if any(module.training for module in model.modules()):
        model.eval()


def forward_batches(
    model: SentenceTransformer,
    sequences: Sequence[Sequence[int] | np.ndarray],
    *,
    batch_size: int = 32,
    hidden_states: bool = False,
    attentions: bool = False,
) -> Iterator[ForwardBatch]:
    """The one batched forward pass: full model inputs (special tokens included), longest first, in batches.

    Each batch is right-padded and run in inference mode; its pooled embeddings come from the model's own
    modules. With `hidden_states` / `attentions` the Hugging Face model inside runs with those outputs on
    (attention maps need an eager attention implementation) and the pooling modules after it, which gives the
    same pooled vectors. Raises ValueError for an empty sequence or one longer than the model's max length.
    """
    _check_sequences(model, sequences)
    order = np.argsort([-len(ids) for ids in sequences], kind="stable")
    states = hidden_states or attentions
    transformer, tail = (text_transformer(model), list(model)[1:]) if states else (None, [])
    eval_mode(model)
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        batch = [sequences[i] for i in index]
        with torch.inference_mode():
            features = batch_features(model.tokenizer, batch, model.device)
            if transformer is None:
                out = model(features)
                hidden: tuple[torch.Tensor, ...] = ()
                maps: tuple[torch.Tensor, ...] = ()
            else:
                raw = transformer(**features, output_hidden_states=hidden_states, output_attentions=attentions)
                out = {**features, "token_embeddings": raw.last_hidden_state}
                for module in tail:  # the model's own pooling / dense / normalize modules
                    out = module(out)
                hidden, maps = tuple(raw.hidden_states or ()), tuple(raw.attentions or ())
            pooled = HostCopy(out["sentence_embedding"].float())  # (B, D)
        yield ForwardBatch(index, [len(ids) for ids in batch], features["attention_mask"], pooled, hidden, maps)


def embed_ids(
    model: SentenceTransformer,
    sequences: Sequence[Sequence[int]],
    *,
    batch_size: int = 32,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Embed full model inputs (special tokens included) with the model's pooling and normalization.

    Sequences are batched longest-first to keep padding small (`forward_batches`). Returns float32 of shape
    (len(sequences), D). Raises ValueError for an empty sequence or one longer than the model's max length.
    """
    batches: list[tuple[np.ndarray, HostCopy]] = []
    for batch in forward_batches(model, sequences, batch_size=batch_size):
        batches.append((batch.index, batch.vectors))  # read at the end: a GPU is not waited for between batches
        if on_batch is not None:
            on_batch(len(batch.index))
    embeddings = np.empty((len(sequences), batches[0][1].numpy().shape[1]), dtype=np.float32)  # forward_batches
    for index, vectors in batches:  # refuses an empty input
        embeddings[index] = vectors.numpy()
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


def embed_side(
    encode: Callable[..., Any],
    texts: Sequence[str],
    stage: str,
    batch_size: int,
    progress: Callable[[str, int, int], None],
) -> torch.Tensor:
    """L2-normalised embeddings of `texts` through one encoder side, in chunks that report progress: (n, D)."""
    chunks = []
    for start in range(0, len(texts), 512):
        chunks.append(np.asarray(encode(list(texts[start : start + 512]), batch_size=batch_size), dtype=np.float32))
        progress(stage, min(start + 512, len(texts)), len(texts))
    return torch.nn.functional.normalize(torch.as_tensor(np.concatenate(chunks)), dim=-1)
