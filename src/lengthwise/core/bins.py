"""Token-length bins: which texts are short and which are long, and any metric per bin (METHODS §4).

A text's length is ``n = len(tok(S))``, its token count without special tokens and *before* truncation. Bins are
``[0, w), [w, 2w), …`` up to the model's content budget ``N - specials`` (what fits without truncation); texts
longer than that share one last bin, marked ``truncated``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from lengthwise.core.embed import TokenView

__all__ = ["LengthBins", "per_bin", "token_lengths"]


@dataclass(frozen=True)
class LengthBins:
    """Bins of width `width` tokens up to `max_content` tokens, plus one bin for longer (truncated) texts."""

    width: int = 100
    max_content: int = 510

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError(f"bin width {self.width} must be ≥ 1 token")
        if self.max_content < 1:
            raise ValueError(f"max content length {self.max_content} must be ≥ 1 token")

    @classmethod
    def for_view(cls, view: TokenView, width: int = 100) -> LengthBins:
        """Bins up to the model's content budget N - specials."""
        return cls(width=width, max_content=view.max_content)

    @property
    def lower_edges(self) -> list[int]:
        """Lower edge of each bin; the last bin holds lengths > `max_content`."""
        return [*range(0, self.max_content + 1, self.width), self.max_content + 1]

    def labels(self) -> list[str]:
        edges = self.lower_edges
        labels = [f"{lo}-{min(hi - 1, self.max_content)}" for lo, hi in pairwise(edges)]
        return [*labels, f">{self.max_content} (truncated)"]

    def assign(self, lengths: np.ndarray) -> np.ndarray:
        """Bin index of each length: (n,) int → (n,) int in ``0..len(labels)-1``."""
        lengths = np.asarray(lengths)
        index = np.minimum(lengths // self.width, (self.max_content) // self.width)
        return np.where(lengths > self.max_content, len(self.lower_edges) - 1, index).astype(np.int64)

    def describe(self) -> dict[str, Any]:
        return {"width": self.width, "max_content": self.max_content, "labels": self.labels()}


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
