"""Token-length bins: which texts are short and which are long, and any metric per bin (METHODS §1, §4).

A text's length is its number of content tokens ``n = len(tok(S))`` (special tokens excluded). One class,
`LengthBins`, bins it in one of two ways, and says which (`counting`):

- ``before_truncation`` (evaluation by length bin): n as the text is, *before* the model's window cuts it.
  Bins ``[0, w), [w, 2w), …`` up to the content budget ``N - specials``; every longer text goes to one last
  bin marked ``truncated``.
- ``after_truncation`` (the document diagnostics): n as the model saw it, *after* the cut, so 1 ≤ n ≤ budget.
  Bins ``1–w, w+1–2w, …`` up to the budget; the last bin also holds every text that was cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import pairwise
from typing import Any

import numpy as np

from lengthwise.core.embed import TokenView
from lengthwise.core.errors import SettingError

__all__ = ["BinCounting", "LengthBins", "per_bin", "token_lengths"]


class BinCounting(str, Enum):
    """Whether `LengthBins` counts a text's tokens before or after truncation to the model's window."""

    BEFORE_TRUNCATION = "before_truncation"
    AFTER_TRUNCATION = "after_truncation"


@dataclass(frozen=True)
class LengthBins:
    """Bins of `width` content tokens up to `max_content` (the model's budget ``N - specials``).

    `counting` says what a length means (see the module docs): before truncation, longer texts share one
    extra bin; after truncation, cut texts sit in the last regular bin.
    """

    width: int = 100
    max_content: int = 510
    counting: BinCounting = BinCounting.BEFORE_TRUNCATION

    def __post_init__(self) -> None:
        if self.width < 1:
            raise SettingError("width", self.width, "the bin width must be ≥ 1 token")
        if self.max_content < 1:
            raise SettingError("max_content", self.max_content, "the content length must be ≥ 1 token")
        object.__setattr__(self, "counting", BinCounting(self.counting))

    @property
    def after_truncation(self) -> bool:
        return self.counting is BinCounting.AFTER_TRUNCATION

    @classmethod
    def for_view(
        cls, view: TokenView, width: int = 100, counting: BinCounting = BinCounting.BEFORE_TRUNCATION
    ) -> LengthBins:
        """Bins up to the model's content budget N - specials."""
        return cls(width=width, max_content=view.max_content, counting=counting)

    @classmethod
    def default(cls, view: TokenView) -> LengthBins:
        """The document diagnostics' bins: eight across the window (width N // 8, at least 16: 32 tokens at
        N = 256), counted after truncation."""
        return cls(max(16, view.max_length // 8), view.max_content, BinCounting.AFTER_TRUNCATION)

    @property
    def lower_edges(self) -> list[int]:
        """Lower edge of each bin. Before truncation the last bin holds lengths > `max_content`."""
        if self.after_truncation:
            return list(range(1, self.max_content + 1, self.width))
        return [*range(0, self.max_content + 1, self.width), self.max_content + 1]

    def labels(self) -> list[str]:
        """``"0-99"`` … ``">510 (truncated)"`` before truncation; ``"1–32"`` … ``"225–254"`` after."""
        if self.after_truncation:
            return [str(self.row(index)["label"]) for index in range(len(self.lower_edges))]
        labels = [f"{lo}-{min(hi - 1, self.max_content)}" for lo, hi in pairwise(self.lower_edges)]
        return [*labels, f">{self.max_content} (truncated)"]

    def assign(self, lengths: np.ndarray) -> np.ndarray:
        """Bin index of each length: (n,) int → (n,) int in ``0..len(labels)-1``."""
        lengths = np.asarray(lengths)
        if self.after_truncation:
            return ((np.minimum(lengths, self.max_content) - 1) // self.width).astype(np.int64)
        index = np.minimum(lengths // self.width, self.max_content // self.width)
        return np.where(lengths > self.max_content, len(self.lower_edges) - 1, index).astype(np.int64)

    def row(self, index: int) -> dict[str, int | float | str]:
        """The bin's index, label and middle in tokens (the x position of plots)."""
        if self.after_truncation:
            low, high = index * self.width + 1, min((index + 1) * self.width, self.max_content)
            return {"bin": int(index), "label": f"{low}–{high}", "middle": (low + high) / 2}
        edges, label = self.lower_edges, self.labels()[index]
        if index == len(edges) - 1:  # the truncated texts: placed at their lower edge
            return {"bin": int(index), "label": label, "middle": float(edges[index])}
        return {
            "bin": int(index),
            "label": label,
            "middle": (edges[index] + min(edges[index + 1] - 1, self.max_content)) / 2,
        }

    def describe(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "max_content": self.max_content,
            "counting": self.counting.value,
            "labels": self.labels(),
        }


def token_lengths(view: TokenView, texts: Sequence[str], batch_size: int = 1024) -> np.ndarray:
    """``len(tok(S))`` of each text, untruncated: (n,) int64."""
    lengths: list[int] = []
    for start in range(0, len(texts), batch_size):
        encoded = view.tokenizer(list(texts[start : start + batch_size]), add_special_tokens=False, verbose=False)
        lengths.extend(len(ids) for ids in encoded["input_ids"])
    return np.asarray(lengths, dtype=np.int64)


def per_bin(
    bins: LengthBins,
    bin_index: np.ndarray,
    metrics: Callable[[np.ndarray], dict[str, float | None]],
) -> list[dict[str, Any]]:
    """One row per bin: label, count and ``metrics(mask)`` where `mask` selects the bin's items ((n,) bool).

    Empty bins are kept with count 0 and no metrics, so tables of different runs line up.
    """
    rows: list[dict[str, Any]] = []
    for index, label in enumerate(bins.labels()):
        mask = bin_index == index
        row: dict[str, Any] = {"bin": label, "count": int(mask.sum())}
        if mask.any():
            row.update(metrics(mask))
        rows.append(row)
    return rows
