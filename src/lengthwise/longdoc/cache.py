"""A byte-bounded LRU cache of window outputs, keyed by the window's token ids.

Corpora repeat themselves (boilerplate headers, shared haystacks in LongEmbed's synthetic tasks): a window whose
ids were already embedded is not embedded again. The cache holds numpy arrays and evicts the least recently used
once `max_bytes` is reached, so memory stays bounded however long the corpus is.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

__all__ = ["WindowCache", "window_key"]


def window_key(ids: Sequence[int]) -> bytes:
    """A compact hashable key for a token-id sequence."""
    return np.asarray(ids, dtype=np.int64).tobytes()


class WindowCache:
    """``key -> np.ndarray`` with least-recently-used eviction past `max_bytes` (0 disables the cache)."""

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes) -> np.ndarray | None:
        value = self._items.get(key)
        if value is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: bytes, value: np.ndarray) -> None:
        if self.max_bytes <= 0 or value.nbytes > self.max_bytes or key in self._items:
            return
        self._items[key] = value
        self._bytes += value.nbytes
        while self._bytes > self.max_bytes:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.nbytes

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)
