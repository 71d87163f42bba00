"""Token vectors of whole documents from any `SentenceTransformer`, and their late-interaction (MaxSim) score.

`encode_token_vectors` reads each text through overlapping windows (`window_spans`) with `LongEncoder`'s own forward
(the model's special tokens, its prompt for the role, a live TempScale patch) and keeps every content token's
contextual state (the model's last hidden states, ``token_embeddings``: training-free) once, from the window where
it sits farthest from a cut (`macro_assignment`); special tokens, prompts and padding are left out, and so are the
tokens a ColBERT's `MultiVectorMask` leaves out of the role's scoring (its skiplist, e.g. punctuation in PyLate and
Stanford checkpoints; `scored_tokens`). Each token carries its character span in the text (the fast tokenizer's
offsets), so a match can be shown as a passage.
`token_maxsim` scores queries against documents: the sum over query tokens of the best document token's similarity
(`sentence_transformers.util.maxsim`; cosine when the rows are normalised).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np
from sentence_transformers import SentenceTransformer
from sentence_transformers.util import maxsim

from lengthwise.core.embed import eval_mode
from lengthwise.longdoc._pipeline import padded_batches, window_spans
from lengthwise.longdoc.config import LongDocConfig, LongDocError, Strategy
from lengthwise.longdoc.encoder import LongEncoder, Role
from lengthwise.longdoc.pooling import macro_assignment

__all__ = ["TokenVectors", "encode_token_vectors", "iter_token_vectors", "scored_tokens", "token_maxsim"]

_BLOCK_DOCUMENTS = 64  # documents whose windows are forwarded together (sorted by length, `batch_size` a batch)


@dataclass(frozen=True)
class TokenVectors:
    """One text's token vectors (n, D) float32 and each token's character span ``text[start:end]`` (n, 2) int64."""

    vectors: np.ndarray
    offsets: np.ndarray


def encode_token_vectors(
    model: SentenceTransformer,
    texts: Sequence[str],
    *,
    role: Role = "document",
    window: int | None = None,
    overlap: int = 64,
    batch_size: int = 32,
    normalize: bool = True,
) -> list[TokenVectors]:
    """Every content token's contextual vector of each text, each token kept once (see `iter_token_vectors`).

    Args:
        model: any sentence-transformers model with a fast tokenizer; its last hidden states are read.
        texts: the documents (or queries: a short query is one window).
        role: "query", "document" or None: the model's prompt and TempScale task for the role.
        window: tokens per window, special tokens included (default: the model's max sequence length, whatever
            long-document choice is saved with the model).
        overlap: content tokens that consecutive windows share (< the window's content).
        batch_size: windows per forward.
        normalize: L2-normalise each token's vector (MaxSim is then a sum of cosines).

    Returns:
        One `TokenVectors` per text, in order.

    Example:
        >>> docs = encode_token_vectors(model, ["a long meeting transcript ..."])
        >>> query = encode_token_vectors(model, ["who chose the budget?"], role="query")[0]
        >>> token_maxsim([query.vectors], [d.vectors for d in docs])  # (1, 1)
    """
    return list(iter_token_vectors(model, texts, role=role, window=window, overlap=overlap, batch_size=batch_size,
                                   normalize=normalize))  # fmt: skip


def iter_token_vectors(
    model: SentenceTransformer,
    texts: Iterable[str],
    *,
    role: Role = "document",
    window: int | None = None,
    overlap: int = 64,
    batch_size: int = 32,
    normalize: bool = True,
) -> Iterator[TokenVectors]:
    """`encode_token_vectors` as a stream: texts are read a block at a time, so memory is bounded by a block.

    Raises `LongDocError` naming the setting (window, overlap, batch_size) when it does not fit the model, or
    naming the text when it is empty or has no tokens.
    """
    if not getattr(model.tokenizer, "is_fast", False):
        raise LongDocError(None, None, "token vectors need a fast tokenizer (character offsets per token)")
    if batch_size < 1:
        raise LongDocError("batch_size", batch_size, "must be ≥ 1")
    plain = LongDocConfig(strategy=Strategy.multi_vector, window=window)  # not the choice saved with the model
    encoder = LongEncoder(model, plain, cache_bytes=0)
    eval_mode(model)  # dropout off, as every encode here
    budget = encoder.content_budget(role)
    if not 0 <= overlap < budget:
        raise LongDocError("overlap", overlap, f"must be ≥ 0 and below the {budget} text tokens a window holds")
    iterator, first = iter(texts), 0
    while block := list(islice(iterator, _BLOCK_DOCUMENTS)):
        yield from _block_vectors(encoder, block, first, role, budget - overlap, batch_size, normalize)
        first += len(block)


def _block_vectors(
    encoder: LongEncoder,
    texts: list[str],
    first: int,
    role: Role,
    stride: int,
    batch_size: int,
    normalize: bool,
) -> Iterator[TokenVectors]:
    """One block of texts: their windows forwarded together (longest first), each token taken from its window."""
    for index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise LongDocError(None, None, f"text #{first + index} is empty or whitespace-only; give it text")
    encoded = encoder.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    ids = [np.asarray(row, dtype=np.int64) for row in encoded["input_ids"]]
    for index, row in enumerate(ids):
        if len(row) == 0:
            raise LongDocError(None, None, f"text #{first + index} has no tokens for this tokenizer")
    budget = encoder.content_budget(role)
    scored = scored_tokens(encoder.model, role)
    spans = [window_spans(len(row), budget, stride) for row in ids]  # (starts, ends) per text
    bases = np.cumsum([0, *map(len, ids)])[:-1]  # each text's first id in `flat`
    flat = np.concatenate(ids)
    starts = np.concatenate([s + base for (s, _), base in zip(spans, bases, strict=True)])  # (W,)
    lengths = np.concatenate([e - s for s, e in spans])  # (W,)
    states = _forward_all(encoder, flat, starts, lengths, role, batch_size)  # per window (T_w, D)
    skip = len(encoder.specials.prefix) + len(encoder._prompt(role))  # leading special and prompt tokens
    window = 0
    for row, (text_starts, text_ends), offsets in zip(ids, spans, encoded["offset_mapping"], strict=True):
        n = len(row)
        pairs = list(zip(text_starts.tolist(), text_ends.tolist(), strict=True))
        assign = macro_assignment(n, pairs)  # (n,) the window each token is read from
        vectors = np.empty((n, states[window].shape[1]), dtype=np.float32)  # (n, D)
        for w, (start, _) in enumerate(pairs):
            where = np.flatnonzero(assign == w)
            vectors[where] = states[window + w][skip + where - start]
        window += len(pairs)
        if normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)  # (n, 1)
            vectors /= np.where(norms > 0, norms, 1.0)
        spans_of = np.asarray(offsets, dtype=np.int64).reshape(n, 2)
        if scored is not None:
            keep = scored(row)
            vectors, spans_of = vectors[keep], spans_of[keep]
        yield TokenVectors(vectors, spans_of)


def scored_tokens(model: SentenceTransformer, role: Role) -> Callable[[np.ndarray], np.ndarray] | None:
    """Content token ids → the (n,) mask of those a ColBERT scores for `role` (None: every token): its
    `MultiVectorMask`'s skiplist where `role` (None counting as a document) is one of its ``skiplist_tasks``, and
    its ``keep_only_token_ids`` for anything but queries, as sentence-transformers' mask drops them from
    ``encode_document``. A plain model has no such module."""
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    mask = next((module for module in model if isinstance(module, MultiVectorMask)), None)
    if mask is None:
        return None
    task = role or "document"
    skipped = np.asarray([], dtype=np.int64)
    if mask.skiplist_words and task in mask.skiplist_tasks:
        unknown, tokenizer = model.tokenizer.unk_token_id, model.tokenizer
        found = [tokenizer.convert_tokens_to_ids(word) for word in mask.skiplist_words]
        skipped = np.asarray([i for i, word in zip(found, mask.skiplist_words, strict=True)
                              if i != unknown or word == tokenizer.unk_token], dtype=np.int64)  # fmt: skip
    only = None if task == "query" or mask.keep_only_token_ids is None else np.asarray(mask.keep_only_token_ids)
    if not len(skipped) and only is None:
        return None

    def keep(ids: np.ndarray) -> np.ndarray:
        kept = ~np.isin(ids, skipped)
        return kept if only is None else kept & np.isin(ids, only)

    return keep


def _forward_all(
    encoder: LongEncoder, flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, role: Role, batch_size: int
) -> list[np.ndarray]:
    """Each window's token states (special tokens included), in window order; forwarded longest first, queries on
    a CPU in batches of one padded width (`padded_batches`), so a query's vectors do not depend on its batch."""
    order = np.argsort(-lengths, kind="stable")
    states: list[np.ndarray] = [np.empty(0)] * len(lengths)
    extra, full = encoder._extra(role), encoder.content_budget(role)
    bucket = encoder._bucket(role)  # None for documents and on a GPU: plain runs of `batch_size`
    for batch in padded_batches(lengths[order] + extra, batch_size, bucket, full + extra):
        rows = order[batch]
        outputs = encoder._forward_windows(flat, starts[rows], lengths[rows], role=role, tokens=True,
                                           bucket=None if bucket is None else (bucket, full))  # fmt: skip
        for row, output in zip(rows.tolist(), outputs, strict=True):  # type: ignore[arg-type]
            states[row] = output
    return states


def token_maxsim(queries: Sequence[np.ndarray], documents: Sequence[np.ndarray]) -> np.ndarray:
    """Late-interaction scores: for each query and document, the sum over the query's tokens of its best
    document token's dot product (cosine for normalised rows), as `sentence_transformers.util.maxsim`.

    Args:
        queries: one (q_i, D) array per query.
        documents: one (n_j, D) array per document, scored in padded chunks.

    Returns:
        (len(queries), len(documents)) float32 scores.
    """
    import torch

    return maxsim([torch.from_numpy(q) for q in queries], [torch.from_numpy(d) for d in documents]).numpy()
