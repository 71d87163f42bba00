"""Dataset rows for each objective, built and checked in full before the first training step.

Every text is tokenised once here with the model's own tokenizer, so a text that this tokenizer reads as nothing
(only zero-width or control characters, say) stops the run *before* step 1, with the file and line it came from,
and never in the middle of an epoch. Documents are split into sentences that keep the whitespace before them,
so that byte-level BPE tokenizers (RoBERTa, ModernBERT), which mark a word's leading space in its token
(``Ġword``), give each sentence the same tokens it has inside the whole text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.progress import track

from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.core.tokens import split_sentences
from lengthwise.training.config import DataKind, Method, TrainConfig
from lengthwise.training.data import TrainingData

__all__ = ["check_kind", "prepare_rows", "sentence_pieces"]

_CHUNK = 1024  # texts tokenised per call
_NO_TOKENS = "has no tokens for this model's tokenizer (e.g. only zero-width or control characters); remove it"


def sentence_pieces(text: str) -> list[str]:
    """The text's sentences in order (`split_sentences`, pysbd), each after the first with the whitespace that
    precedes it in the text, so that tokenising the pieces one by one gives the whole text's tokens."""
    pieces: list[str] = []
    cursor = 0
    for index, sentence in enumerate(split_sentences(text)):
        start = text.find(sentence, cursor)
        if start < 0:  # pysbd changed the text here: a plain space stands for the gap
            pieces.append(sentence if index == 0 else " " + sentence)
            continue
        gap = text[cursor:start]
        lead = gap[len(gap.rstrip()) :] if index else ""  # the whitespace just before the sentence
        pieces.append(lead + sentence)
        cursor = start + len(sentence)
    return pieces


def _token_counts(tokenizer: Any, texts: Sequence[str], max_content: int) -> list[int]:
    """Content tokens (no special tokens) of each text, at most `max_content`."""
    counts: list[int] = []
    for start in range(0, len(texts), _CHUNK):
        chunk = list(texts[start : start + _CHUNK])
        encoded = tokenizer(chunk, add_special_tokens=False, truncation=True, max_length=max_content)["input_ids"]
        counts.extend(len(ids) for ids in encoded)
    return counts


def _flat(groups: Iterable[Sequence[str]]) -> list[str]:
    return [text for group in groups for text in group]


def _regroup(values: Sequence[Any], groups: Sequence[Sequence[str]]) -> list[list[Any]]:
    out, start = [], 0
    for group in groups:
        out.append(list(values[start : start + len(group)]))
        start += len(group)
    return out


def check_kind(config: TrainConfig, data: TrainingData) -> None:
    """Refuse data of the wrong kind for the method (pairs for a single-text method, or the other way round)."""
    method = config.method.value
    if config.data_kind is DataKind.PAIR and data.kind != "pair":
        raise SettingError("method", method, f"needs positive pairs; {data.source} holds single texts")
    if config.data_kind is not DataKind.PAIR and data.kind != "text":
        problem = f"trains on single texts; {data.source} holds pairs (use pairs/copy-concat)"
        raise SettingError("method", method, problem)


def prepare_rows(
    config: TrainConfig, data: TrainingData, tokenizer: Any, max_content: int, *, progress: bool = False
) -> list[dict[str, Any]]:
    """Dataset rows for the method: ``text``, ``sentences`` (split once, here) or ``anchor``/``positive``.

    Every text is checked against `tokenizer` (content tokens, `max_content` at most): a text or pair side with no
    token raises `DataFormatError` naming its file and line; a sentence with no token is dropped from its
    document. Documents with fewer than two sentences are dropped for coco-dr, laser-intra and simde (they cannot
    form a pair); a one-line error says so if nothing is left.
    """
    check_kind(config, data)
    kind = config.data_kind
    method = config.method.value
    if kind is DataKind.PAIR:
        counts = _regroup(_token_counts(tokenizer, _flat(data.pairs), max_content), data.pairs)
        for (first, second), where in zip(counts, data.where, strict=True):
            if not first or not second:
                side = "first" if not first else "second"
                raise DataFormatError(None, None, f"{where}: the {side} text of the pair {_NO_TOKENS}")
        return [{"row": i, "anchor": a, "positive": b} for i, (a, b) in enumerate(data.pairs)]
    if config.method in (Method.SIMCSE, Method.HICL):
        for count, where in zip(_token_counts(tokenizer, data.texts, max_content), data.where, strict=True):
            if not count:
                raise DataFormatError(None, None, f"{where}: the text {_NO_TOKENS}")
        return [{"row": i, "text": text} for i, text in enumerate(data.texts)]
    texts = track(data.texts, description="splitting sentences") if progress else data.texts
    split = [sentence_pieces(text) for text in texts]
    counts = _regroup(_token_counts(tokenizer, _flat(split), max_content), split)
    documents = []
    for pieces, sizes, where in zip(split, counts, data.where, strict=True):
        kept = [piece for piece, size in zip(pieces, sizes, strict=True) if size]
        if not kept and kind is not DataKind.DOCUMENT:
            raise DataFormatError(None, None, f"{where}: the text {_NO_TOKENS}")
        documents.append(kept)
    if kind is DataKind.DOCUMENT:
        documents = [sentences for sentences in documents if len(sentences) >= 2]
        if not documents:
            raise DataFormatError("data", data.source, f"no document has two sentences; {method} needs them")
    return [{"row": i, "sentences": sentences} for i, sentences in enumerate(documents)]
