"""Token-level perturbations of the retrieval length-bias audit (METHODS §6): dilution, repetition, position.

Everything works on content ids (``tok(S)``, no special tokens), as `lengthwise.core.tokens` does; repetition is
its `elongate`. Filler is a run of words from other documents, and a cut inside the filler always falls on a
word start, so decoding the ids to text and tokenizing again gives back the same ids (the audit checks every
sequence and reports the rate). A document longer than the budget is cut to its first tokens first, exactly as
the encoder truncates it, so the model sees the whole perturbed sequence.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.core.tokens import elongate

__all__ = [
    "Filler",
    "WordIds",
    "build_filler",
    "cut_to_fit",
    "dilute",
    "insert_at_depth",
    "repeat",
    "shuffled_order",
    "word_ids",
]

Ids = list[int]


@dataclass(frozen=True)
class WordIds:
    """A text's content ids and, per id, whether a word starts there (the tokenizer's own word boundaries)."""

    ids: tuple[int, ...]
    starts: tuple[bool, ...]

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.starts):
            raise SettingError("starts", len(self.starts), f"word-start flags for {len(self.ids)} ids; give one each")


def word_ids(tokenizer, texts: Sequence[str]) -> list[WordIds]:
    """Content ids and word starts of each text, from a fast tokenizer's ``word_ids()`` (untruncated).

    Raises `SettingError` for a slow tokenizer, which does not know its word boundaries.
    """
    if not getattr(tokenizer, "is_fast", False):
        problem = "the retrieval audit needs a fast (Rust) tokenizer to cut filler at word boundaries"
        raise SettingError("tokenizer", type(tokenizer).__name__, problem)
    encoded = tokenizer(list(texts), add_special_tokens=False, verbose=False)
    result = []
    for index, ids in enumerate(encoded["input_ids"]):
        words = encoded.word_ids(index)
        starts = tuple(i == 0 or words[i] is None or words[i] != words[i - 1] for i in range(len(ids)))
        result.append(WordIds(tuple(ids), starts))
    return result


@dataclass(frozen=True)
class Filler:
    """Unrelated text as content ids with word starts; ``starts[0]`` is always True."""

    ids: tuple[int, ...]
    starts: tuple[bool, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def head(self, k: int) -> Filler:
        """The first k tokens (a cut at the end may fall inside a word: nothing follows it there)."""
        return Filler(self.ids[:k], self.starts[:k])

    def split_index(self, depth: float) -> int:
        """The word start nearest ``depth · len`` (0 and len are always allowed): where a unit goes at `depth`."""
        if not 0.0 <= depth <= 1.0:
            raise SettingError("depth", depth, "must lie in [0, 1]")
        target = depth * len(self.ids)
        candidates = [i for i, start in enumerate(self.starts) if start] + [len(self.ids)]
        return min(candidates, key=lambda i: (abs(i - target), i))


def build_filler(sources: Sequence[WordIds], order: Sequence[int], length: int) -> Filler:
    """Whole documents ``sources[order[0]], sources[order[1]], …`` joined at the token level and cut to `length`
    tokens; the order is cycled when the sources are too short. Raises `DataFormatError` when they hold no tokens."""
    if length < 1:
        raise SettingError("length", length, "the filler length must be ≥ 1")
    usable = [index for index in order if sources[index].ids]
    if not usable:
        raise DataFormatError(None, None, "no filler: every candidate document is empty or relevant to the query")
    ids: list[int] = []
    starts: list[bool] = []
    position = 0
    while len(ids) < length:
        source = sources[usable[position % len(usable)]]
        ids.extend(source.ids)
        starts.extend((True, *source.starts[1:]))  # a document always begins a word
        position += 1
    return Filler(tuple(ids[:length]), tuple(starts[:length]))


def cut_to_fit(ids: Sequence[int], budget: int) -> Ids:
    """The first `budget` tokens of `ids` (all of them when shorter), as the encoder's truncation would keep."""
    if budget < 1:
        raise SettingError("budget", budget, "the token budget must be ≥ 1")
    return list(ids[:budget])


def dilute(ids: Sequence[int], filler: Filler, k: int) -> Ids:
    """`ids` followed by the first k filler tokens."""
    if k > len(filler):
        raise SettingError("k", k, f"more filler tokens than the filler holds ({len(filler)})")
    return [*ids, *filler.ids[:k]]


def repeat(ids: Sequence[int], m: int, budget: int) -> Ids:
    """`f(S, m)` of METHODS §1 without special tokens: `ids` copied m times at the token level, capped by `budget`."""
    return elongate(ids, m, budget)


def insert_at_depth(unit: Sequence[int], filler: Filler, depth: float) -> Ids:
    """`unit` placed inside the whole filler at the word start nearest ``depth · len(filler)``."""
    split = filler.split_index(depth)
    return [*filler.ids[:split], *unit, *filler.ids[split:]]


def shuffled_order(count: int, rng: random.Random, skip: set[int]) -> list[int]:
    """``0..count-1`` in a seeded random order, leaving out `skip` (e.g. documents relevant to the query)."""
    order = [index for index in range(count) if index not in skip]
    rng.shuffle(order)
    return order
