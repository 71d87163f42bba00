"""The encode pipeline under `LongEncoder` (issue 48.2): CPU preparation runs ahead of the forward and overlaps it.

- `prefetch` runs a generator of CPU work (reading, tokenizing a piece of a block, turning ids into one numpy
  array) in a thread a bounded number of items ahead; Hugging Face's fast tokenizers and the torch forward both
  release the GIL, so on two cores the tokenizer of the next piece runs while the model embeds this one.
- `BlockWindows` holds the distinct windows of one block in first-appearance order (the cache looked up once per
  distinct window) and forwards them longest first in batches: batches of full-width windows as soon as they fill,
  the rest when the block ends. That is exactly the order and the batches of the encoder before the pipeline (one
  stable sort of the block's distinct windows by length), so in fp32 the vectors are byte-identical to it.
- `window_spans` cuts a document into windows with numpy (the plain strided case of `lengthwise.core.tokens.windows`).
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from typing import TypeVar

import numpy as np

from lengthwise.longdoc._cache import WindowCache

__all__ = ["BlockWindows", "Forward", "prefetch", "window_spans"]

T = TypeVar("T")
Forward = Callable[[np.ndarray, np.ndarray, np.ndarray], "np.ndarray | list[np.ndarray]"]
_END = object()


def _put(channel: queue.Queue, stop: threading.Event, item: object) -> bool:
    while not stop.is_set():
        try:
            channel.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def prefetch(items: Iterator[T], depth: int = 2) -> Generator[T, None, None]:
    """`items` produced in a thread up to `depth` ahead, yielded here in order; its error is raised here, in turn.

    Closing the returned generator stops the thread at its next item.
    """
    channel: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if not _put(channel, stop, (True, item)):
                    return
            _put(channel, stop, (True, _END))
        except BaseException as error:  # handed to the consumer, raised there
            _put(channel, stop, (False, error))

    thread = threading.Thread(target=produce, name="lengthwise-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = channel.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        thread.join()


def window_spans(n: int, size: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """``lengthwise.core.tokens.windows(n, size, stride)`` without cut points, as (starts, ends) int64 arrays.

    Starts step by `stride` while a window ends before n; with overlap the last window is full and ends at n.
    """
    if n <= size:
        return np.zeros(1, dtype=np.int64), np.full(1, n, dtype=np.int64)
    if stride == size:
        starts = np.arange(0, n, size, dtype=np.int64)
        return starts, np.minimum(starts + size, n)
    count = -(-(n - size) // stride)  # starts k * stride with k * stride + size < n
    starts = np.append(np.arange(count, dtype=np.int64) * stride, n - size)
    return starts, starts + size


class _Buffer:
    """A growing int64 array (the block's token ids, piece after piece)."""

    def __init__(self) -> None:
        self.array = np.empty(1 << 16, dtype=np.int64)
        self.size = 0

    def extend(self, values: np.ndarray) -> int:
        base, end = self.size, self.size + len(values)
        if end > len(self.array):
            grown = np.empty(max(end, 2 * len(self.array)), dtype=np.int64)
            grown[:base] = self.array[:base]
            self.array = grown
        self.array[base:end] = values
        self.size = end
        return base


class BlockWindows:
    """The distinct windows of one block, their cached or forwarded outputs, in the encoder's order.

    `forward(ids, starts, lengths)` embeds content windows ``ids[start : start + length]`` (the caller wraps them):
    vectors (B, D) or token states per window. `full` is the longest content a window can have: windows of that
    length sort first, so their batches go as soon as `batch_size` of them wait.
    """

    def __init__(
        self, *, head: bytes, cache: WindowCache, batch_size: int, full: int, forward: Forward, tokens: bool
    ) -> None:
        self.head, self.cache, self.batch_size, self.full = head, cache, batch_size, full
        self.forward, self.tokens = forward, tokens
        self.ids = _Buffer()
        self.keys: list[bytes] = []
        self.index: dict[bytes, int] = {}
        self.starts: list[int] = []
        self.lengths: list[int] = []
        self.hits: dict[int, np.ndarray] = {}
        self.pending: list[int] = []  # distinct windows not in the cache, first appearance first
        self.waiting: list[int] = []  # full-width pending windows not yet forwarded
        self.early: set[int] = set()  # full-width windows forwarded before the block ended
        self.results: list[tuple[list[int], np.ndarray | list[np.ndarray]]] = []

    def add_ids(self, flat: np.ndarray) -> int:
        """Append a piece's token ids; returns the offset of its first id."""
        return self.ids.extend(flat)

    def add(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The rows of windows ``ids[start:end]`` (offsets into the block's ids), new ones registered: (k,)."""
        ids, head, index = self.ids.array, self.head, self.index
        rows = np.empty(len(starts), dtype=np.int64)
        for position, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            key = hashlib.blake2b(head + ids[start:end].tobytes(), digest_size=16).digest()
            row = index.get(key)
            if row is None:
                row = self._register(key, start, end - start)
            rows[position] = row
        return rows

    def _register(self, key: bytes, start: int, length: int) -> int:
        row = len(self.keys)
        self.index[key] = row
        self.keys.append(key)
        self.starts.append(start)
        self.lengths.append(length)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits[row] = cached
            return row
        self.pending.append(row)
        if length == self.full:
            self.waiting.append(row)
            if len(self.waiting) == self.batch_size:
                self._run(self.waiting)
                self.early.update(self.waiting)
                self.waiting = []
        return row

    def _run(self, rows: list[int]) -> None:
        starts = np.asarray([self.starts[row] for row in rows], dtype=np.int64)
        lengths = np.asarray([self.lengths[row] for row in rows], dtype=np.int64)
        self.results.append((rows, self.forward(self.ids.array, starts, lengths)))

    def finish(self) -> np.ndarray | list[np.ndarray]:
        """Forward what is left (longest first), store new outputs in the cache; every row's output, by row."""
        rest = [row for row in self.pending if row not in self.early] if self.early else self.pending
        order = np.argsort([-self.lengths[row] for row in rest], kind="stable")
        for first in range(0, len(order), self.batch_size):
            self._run([rest[i] for i in order[first : first + self.batch_size]])
        table = self._table()
        if self.cache.max_bytes > 0:
            for row in self.pending:
                self.cache.put(self.keys[row], table[row].copy())  # own memory: the cache keeps it
        return table

    def _table(self) -> np.ndarray | list[np.ndarray]:
        if self.tokens:
            states: list[np.ndarray] = [np.empty(0)] * len(self.keys)
            for rows, outputs in self.results:
                for row, output in zip(rows, outputs, strict=True):
                    states[row] = output
            for row, output in self.hits.items():
                states[row] = output
            return states
        width = next(iter(self.hits.values())).shape[0] if self.hits else self.results[0][1][0].shape[0]
        table = np.empty((len(self.keys), width), dtype=np.float32)
        for rows, outputs in self.results:
            table[rows] = outputs
        for row, output in self.hits.items():
            table[row] = output
        return table
