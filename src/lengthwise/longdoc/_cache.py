"""A byte-bounded LRU cache of window outputs, keyed by the window's token ids.

Corpora repeat themselves (boilerplate headers, shared haystacks in LongEmbed's synthetic tasks): a window whose
ids were already embedded is not embedded again. The cache holds numpy arrays and evicts the least recently used
once `max_bytes` is reached (arrays, keys and per-entry overhead counted), so memory stays bounded however long
the corpus is. Keys are 16-byte BLAKE2b digests of the ids.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

__all__ = ["WindowCache", "window_key"]


def window_key(ids: Sequence[int], head: bytes = b"") -> bytes:
    """A 16-byte key for a token-id sequence (BLAKE2b of `head` and the ids), so keys stay small in the cache."""
    return hashlib.blake2b(head + np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()


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
        size = _size(key, value)
        if self.max_bytes <= 0 or size > self.max_bytes or key in self._items:
            return
        self._items[key] = value
        self._bytes += size
        while self._bytes > self.max_bytes:
            dropped_key, dropped = self._items.popitem(last=False)
            self._bytes -= _size(dropped_key, dropped)

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)


def _size(key: bytes, value: np.ndarray) -> int:
    """What an entry costs: the array, the key and the objects around them (about 200 bytes)."""
    return value.nbytes + len(key) + 200
