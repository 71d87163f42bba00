"""Token-level length operations shared by audit and training (METHODS §1).

Everything here works on token ids *without* special tokens (``tok(S)``); `wrap` adds the model's special
tokens exactly once. Elongation never joins strings and re-tokenizes, so sub-words never merge across copies.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache

from lengthwise.core.errors import DataFormatError, SettingError

__all__ = [
    "Elongation",
    "ElongationMode",
    "SpecialTokens",
    "content_ids",
    "elongate",
    "elongation_factor",
    "first_k",
    "kept_text",
    "segments",
    "shuffle_words",
    "special_tokens",
    "split_sentences",
    "windows",
]

Ids = list[int]
MAX_TEXT_CHARS = 1_000_000  # ~200k tokens: far beyond any encoder's window; longer input is almost surely a mistake


class ElongationMode(str, Enum):
    """How `Elongation` picks m: one fixed m, m uniform in its allowed range per text, or m = 2."""

    FIXED = "fixed"
    RANDOM = "random"
    TWICE = "twice"


@dataclass(frozen=True)
class SpecialTokens:
    """The ids a tokenizer puts before and after a single text, e.g. ``[CLS]`` / ``[SEP]``."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.prefix) + len(self.suffix)

    def wrap(self, ids: Sequence[int]) -> Ids:
        """``prefix + ids + suffix``: special tokens once, around the whole sequence."""
        return [*self.prefix, *ids, *self.suffix]


def special_tokens(tokenizer) -> SpecialTokens:
    """Find the tokenizer's special-token prefix and suffix by encoding a probe text with and without them."""
    probe = "length"
    with_special = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    for start in range(len(with_special) - len(bare) + 1):
        if with_special[start : start + len(bare)] == bare:
            return SpecialTokens(tuple(with_special[:start]), tuple(with_special[start + len(bare) :]))
    raise SettingError(
        "tokenizer", type(tokenizer).__name__, f"cannot locate the content tokens inside {with_special}; unsupported"
    )


def content_ids(
    tokenizer, texts: Sequence[str], max_content: int | None = None, names: Sequence[str] | None = None
) -> list[Ids]:
    """``tok(S)`` for each text: ids without special tokens, truncated to `max_content` tokens if given.

    Raises `DataFormatError` for an empty or whitespace-only text, one over `MAX_TEXT_CHARS`, or one with no tokens,
    naming it by ``names[i]`` (e.g. ``pairs.tsv:7 (text1)``) when given, else by its index.
    """

    def name(index: int) -> str:
        return names[index] if names is not None else f"text #{index}"

    for index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(
                None, None, f"{name(index)} is empty or whitespace-only; remove it or give it content"
            )
        if len(text) > MAX_TEXT_CHARS:
            raise DataFormatError(
                None,
                None,
                f"{name(index)} has {len(text):,} characters (limit {MAX_TEXT_CHARS:,}); "
                "split the document or cut it before auditing",
            )
    kwargs: dict[str, object] = {"add_special_tokens": False}
    if max_content is not None:
        kwargs.update(truncation=True, max_length=max_content)
    encoded = tokenizer(list(texts), **kwargs)["input_ids"]
    for index, ids in enumerate(encoded):
        if not ids:
            problem = f"{name(index)} ({texts[index][:40]!r}) has no tokens for this tokenizer; remove it"
            raise DataFormatError(None, None, problem)
    return [list(ids) for ids in encoded]


@dataclass(frozen=True)
class Elongation:
    """How many copies `f(S, m)` makes: a fixed m, m drawn uniformly from its allowed range, or m = 2.

    In every mode m is capped so that ``m * n <= max_content``; a copy is never cut in the middle.
    """

    mode: ElongationMode | str = ElongationMode.FIXED  # a plain value ("random") is turned into the enum
    m: int = 1

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", ElongationMode(self.mode))
        except ValueError:
            choices = ", ".join(mode.value for mode in ElongationMode)
            raise SettingError("mode", self.mode, f"not an elongation mode; use one of {choices}") from None
        if self.mode is ElongationMode.FIXED and self.m < 1:
            raise SettingError("m", self.m, "the elongation factor must be ≥ 1")

    @classmethod
    def parse(cls, spec: str | int) -> Elongation:
        """Read ``"100"``, ``"random"`` or ``"twice"`` (an ``elongation`` setting as text)."""
        text = str(spec).strip().lower()
        if text in ("random", "twice"):
            return cls(mode=ElongationMode(text))
        try:
            return cls(mode=ElongationMode.FIXED, m=int(text))
        except ValueError:
            raise SettingError("elongation", spec, "use a positive integer, 'random' or 'twice'") from None

    def describe(self) -> str:
        return str(self.m) if self.mode is ElongationMode.FIXED else ElongationMode(self.mode).value


def elongation_factor(n: int, max_content: int, elongation: Elongation, rng: random.Random | None = None) -> int:
    """The m actually used for a text of n content tokens: capped at ``floor(max_content / n)``, at least 1."""
    if n < 1:
        raise SettingError("n", n, "cannot elongate an empty token sequence")
    cap = max(1, max_content // n)
    if elongation.mode is ElongationMode.RANDOM:
        return (rng or random).randint(1, cap)
    wanted = 2 if elongation.mode is ElongationMode.TWICE else elongation.m
    return min(wanted, cap)


def elongate(ids: Sequence[int], m: int, max_content: int) -> Ids:
    """`f(S, m)` without special tokens: `ids` repeated m times at the token level (capped; see below).

    m is capped at ``floor(max_content / n)``. A text longer than `max_content` by itself is truncated to
    `max_content` (one copy), exactly as the un-elongated text is truncated when it is embedded.
    """
    n = len(ids)
    if n == 0:
        raise SettingError("ids", [], "cannot elongate an empty token sequence")
    if m < 1:
        raise SettingError("m", m, "the elongation factor must be ≥ 1")
    if n >= max_content:
        return list(ids[:max_content])
    return list(ids) * min(m, max_content // n)


def first_k(ids: Sequence[int], k: int) -> Ids:
    """The first k content tokens (all of them when the text is shorter)."""
    if k < 1:
        raise SettingError("k", k, "first-k needs k ≥ 1")
    return list(ids[:k])


def shuffle_words(text: str, rng: random.Random) -> str:
    """The text with its whitespace-separated words in a random order (laser3 §6.1's word-order probe).

    Words stay whole and are re-joined with single spaces, so tokenizing the result gives the same word
    pieces as the original (in another order) for whitespace-pre-tokenizing models.
    """
    words = text.split()
    if len(words) < 2:
        return text
    for _ in range(10):  # avoid returning the original order for short texts
        rng.shuffle(words)
        shuffled = " ".join(words)
        if shuffled != " ".join(text.split()):
            return shuffled
    return " ".join(words)


def kept_text(tokenizer, text: str, max_content: int) -> str:
    """The start of `text` whose tokens are its first `max_content` content tokens: what survives truncation.

    The whole text when it fits. The word-shuffle probe shuffles only this part, so both sides of the probe
    hold the same words (METHODS §1, laser3 §6.1). Uses the fast tokenizer's character offsets; a tokenizer
    without them falls back to the longest run of whole words that fits.
    """
    if max_content < 1:
        raise SettingError("max_content", max_content, "must be ≥ 1")
    if getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        offsets = encoded["offset_mapping"]
        return text if len(offsets) <= max_content else text[: offsets[max_content - 1][1]]
    words = text.split()

    def fits(k: int) -> bool:
        return len(tokenizer(" ".join(words[:k]), add_special_tokens=False, verbose=False)["input_ids"]) <= max_content

    if fits(len(words)):
        return text
    low, high = 0, len(words)  # fits(low), not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return " ".join(words[: max(low, 1)])


def windows(
    n: int, size: int, stride: int | None = None, cut_points: Sequence[int] | None = None
) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` cutting n tokens into windows of at most `size` tokens (METHODS §5).

    `stride` (default `size`: no overlap) is the step between window starts, 1 ≤ stride ≤ size. Without
    overlap the last window may be shorter; with overlap the last window ends at the last token and is full
    (it starts at ``n - size``). `cut_points` (sorted token indices a window may end at, e.g. just after a
    sentence end) move a cut back to the last such point in the window's last quarter when there is one; the
    next window then starts ``size - stride`` tokens before that cut. Every token lies in at least one window.
    HiCL's `segments` are the non-overlapping case.
    """
    if size < 1:
        raise SettingError("size", size, "the window size must be ≥ 1")
    stride = size if stride is None else stride
    if not 1 <= stride <= size:
        raise SettingError("stride", stride, f"must lie between 1 and the window size {size}")
    if n < 1:
        raise SettingError("n", n, "cannot cut an empty token sequence into windows")
    overlap = size - stride
    points = sorted(set(cut_points)) if cut_points else []
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + size, n)
        if end < n and points:
            earliest = start + size - size // 4
            inside = points[bisect.bisect_left(points, earliest) : bisect.bisect_right(points, end)]
            end = inside[-1] if inside else end
        if end == n and overlap and spans and not points:
            start = max(spans[-1][0] + 1, n - size)  # the last overlapping window is full and ends at n
        spans.append((start, end))
        if end == n:
            return spans
        following = end - overlap
        start = following if following > start else end


def segments(ids: Sequence[int], length: int) -> list[Ids]:
    """HiCL's slicing: consecutive non-overlapping runs of `length` tokens, the last one shorter if need be.

    ``len(result) == 1 + (n - 1) // length`` and concatenating the result gives back `ids` (hicl §3.1).
    """
    if length < 1:
        raise SettingError("length", length, "the segment length must be ≥ 1")
    if not ids:
        raise SettingError("ids", [], "cannot slice an empty token sequence into segments")
    return [list(ids[start:end]) for start, end in windows(len(ids), length)]


@cache
def _segmenter(language: str):
    try:
        import pysbd
    except ImportError:  # pragma: no cover - pysbd is a core dependency; this guards broken installs
        raise ImportError("sentence splitting needs pysbd: pip install pysbd") from None
    return pysbd.Segmenter(language=language, clean=False)


def split_sentences(text: str, language: str = "en") -> list[str]:
    """The text's sentences in order, stripped and non-empty, by pysbd's rule-based segmenter.

    pysbd (Sadvilkar & Neumann, 2020) handles abbreviations, decimals and ellipses that a regex on ``.?!``
    gets wrong; it is deterministic and needs no model download.
    """
    return [sentence.strip() for sentence in _segmenter(language).segment(text) if sentence.strip()]
