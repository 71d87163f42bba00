"""The encode pipeline under `LongEncoder` (issue 48.2): CPU preparation runs ahead of the forward and overlaps it.

- `prefetch` runs a generator of CPU work (reading, tokenizing a piece of a block, turning ids into one numpy
  array) in a thread a bounded number of items ahead; Hugging Face's fast tokenizers and the torch forward both
  release the GIL, so on two cores the tokenizer of the next piece runs while the model embeds this one.
- `BlockWindows` holds the distinct windows of one block in first-appearance order (the cache looked up once per
  distinct window) and forwards them longest first in batches: batches of full-width windows as soon as they fill,
  the rest when the block ends. That is exactly the order and the batches of the encoder before the pipeline (one
  stable sort of the block's distinct windows by length), so in fp32 the vectors are byte-identical to it; only
  queries on a CPU are batched by padded width (`padded_batches`). Each batch's vectors stay on their way to
  the host (`lengthwise.core.embed.HostCopy`) until the block ends, so a GPU is not waited for between batches.
- `window_spans` cuts a document into windows with numpy (the plain strided case of `lengthwise.core.tokens.windows`).
"""

from __future__ import annotations

import hashlib
import itertools
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from typing import TypeVar, cast

import numpy as np

from lengthwise.core.embed import HostCopy
from lengthwise.core.forwards import sharing
from lengthwise.longdoc._cache import WindowCache

__all__ = ["BlockWindows", "Forward", "padded_batches", "padded_widths", "prefetch", "window_spans"]

T = TypeVar("T")
Forward = Callable[[np.ndarray, np.ndarray, np.ndarray], "HostCopy | list[np.ndarray]"]
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


LEAST_WIDTH = 16  # a bucketed window is padded to at least this many tokens: every product then has ≥ 16 rows


def padded_widths(lengths: np.ndarray, bucket: int, most: int) -> np.ndarray:
    """The width each window of `lengths` tokens is padded to when batches are bucketed: the next multiple of
    `bucket`, at least `LEAST_WIDTH`, but at most `most` (the widest window there can be). A function of the
    window's own length alone. The floor: MKL's float32 GEMM takes another kernel for a product of fewer than 16
    rows (measured on an Intel Xeon with AVX-512 and AMX, torch 2.13), so a short query alone (one row of 8 tokens)
    came out apart from the same query in a batch in the last bits; at 16 tokens or more a row's products do not
    depend on the row count."""
    widths = np.maximum(-(-lengths // bucket) * bucket, LEAST_WIDTH)
    return np.minimum(widths, max(most, int(lengths.max(initial=0))))


def padded_batches(lengths: np.ndarray, batch_size: int, bucket: int | None = None, most: int = 0) -> list[slice]:
    """Batches of windows of `lengths` tokens, sorted longest first: runs of at most `batch_size`; with `bucket`,
    a batch also holds windows of one padded width only (`padded_widths`, at most `most`).

    Without `bucket` every batch but the last holds `batch_size` windows. With it, every window is padded to a
    width set by its own length, and a batch holds windows of that one width: on a CPU a row's vector then does not
    depend on what else is in its batch, in any precision. It did before: the kernels (attention's blocking over the
    padded length, a half GEMM's) change with the padded width, so a query alone and the same query beside a longer
    one came out apart in the last bits (fp32) or in the third decimal (bf16: 39 of 64 queries moved, up to 1.2e-3;
    issue 62.1). The row count does not matter in float32 once a product has 16 rows or more (`LEAST_WIDTH`;
    checked on 804 rows, one and two threads, on an AMD host; on an Intel host with AMX products of 16 to 512 rows
    agree, fewer do not); half-precision queries on a CPU are forwarded one a batch (`LongEncoder._batch_windows`).
    A batch of mixed-length queries also pads little: at most ``bucket - 1`` tokens a row (16 at least).
    """
    count = len(lengths)
    if bucket is None:
        return [slice(first, min(first + batch_size, count)) for first in range(0, count, batch_size)]
    widths = padded_widths(lengths, bucket, most)
    edges = [0, *(np.flatnonzero(np.diff(widths)) + 1).tolist(), count]
    return [slice(first, min(first + batch_size, stop))
            for start, stop in itertools.pairwise(edges) for first in range(start, stop, batch_size)]  # fmt: skip


class _Buffer:
    """A growing int64 array (the block's token ids piece after piece; its windows' starts and lengths)."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.array = np.empty(capacity, dtype=np.int64)
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
    vectors (B, D) as a `HostCopy`, read only when the block ends (so a GPU is never waited for between batches),
    or token states per window. `full` is the longest content a window can have: windows of that length sort
    first, so their batches go as soon as `batch_size` of them wait. A piece's windows are registered together:
    numpy gathers their ids, one dict pass finds the new ones, and the cache (when it holds anything) is asked once
    per new window.
    """

    def __init__(
        self,
        *,
        head: bytes,
        cache: WindowCache,
        batch_size: int,
        full: int,
        forward: Forward,
        tokens: bool,
        bucket: int | None = None,
        extra: int = 0,
    ) -> None:
        self.head, self.cache, self.batch_size, self.full = head, cache, batch_size, full
        self.forward, self.tokens = forward, tokens
        self.bucket, self.extra = bucket, extra  # `padded_batches` of the windows left at the end
        self.caching = cache.max_bytes > 0 or len(cache) > 0
        self.ids = _Buffer()
        self.index: dict[bytes, int] = {}  # a window's ids (padded to `full` with -1) -> its row
        self.starts, self.lengths = _Buffer(1024), _Buffer(1024)  # by row
        self.keys: list[bytes] = []  # the cache key of each row, when caching
        self.hits: dict[int, np.ndarray] = {}
        self.pending: list[np.ndarray] = []  # rows not in the cache, first appearance first
        self.waiting: list[int] = []  # full-width pending rows not yet forwarded
        self.early: list[np.ndarray] = []  # full-width rows forwarded before the block ended
        self.results: list[tuple[np.ndarray, HostCopy | list[np.ndarray]]] = []
        self.forwarded = 0  # rows through the model so far (with `hits`: the block's share done)
        self.whole: set[int] = set()  # rows that are a whole text (its one window): `finish` may batch them apart

    def add_ids(self, flat: np.ndarray) -> int:
        """Append a piece's token ids; returns the offset of its first id."""
        return self.ids.extend(flat)

    def add(self, starts: np.ndarray, ends: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
        """The rows of windows ``ids[start:end]`` (offsets into the block's ids), new ones registered: (k,).
        `whole`: (k,) bool, the windows that are a whole text (a text of one window)."""
        lengths = ends - starts  # (k,)
        width = max(self.full, int(lengths.max()))
        inside = np.arange(width, dtype=np.int64) < lengths[:, None]  # (k, W)
        content = np.where(inside, self.ids.array[np.where(inside, starts[:, None] + np.arange(width), 0)], -1)
        keys = cast(list[bytes], content.view(np.dtype((np.void, 8 * width))).ravel().tolist())  # ids as bytes
        index, before = self.index, len(self.index)
        rows = np.fromiter((index.setdefault(key, len(index)) for key in keys), dtype=np.int64, count=len(keys))
        if len(index) > before:
            fresh = np.flatnonzero(rows >= before)
            first = fresh[np.unique(rows[fresh], return_index=True)[1]]  # each new row's first window
            self._register(starts[first], lengths[first])
        if whole is not None:
            self.whole.update(rows[whole].tolist())
        return rows

    def _register(self, starts: np.ndarray, lengths: np.ndarray) -> None:
        """New distinct windows, in first-appearance order: looked up in the cache, full-width batches sent."""
        base = self.starts.extend(starts)
        self.lengths.extend(lengths)
        rows = np.arange(base, base + len(starts), dtype=np.int64)
        if self.caching:
            ids, head = self.ids.array, self.head
            keys = [hashlib.blake2b(head + ids[start : start + length].tobytes(), digest_size=16).digest()
                    for start, length in zip(starts.tolist(), lengths.tolist(), strict=True)]  # fmt: skip
            self.keys.extend(keys)
            missing = []
            for row, key in zip(rows.tolist(), keys, strict=True):
                cached = self.cache.get(key)
                if cached is None:
                    missing.append(row)
                else:
                    self.hits[row] = cached
            rows = np.asarray(missing, dtype=np.int64)
        self.pending.append(rows)
        self.waiting.extend(rows[self.lengths.array[rows] == self.full].tolist())
        while len(self.waiting) >= self.batch_size:
            batch = np.asarray(self.waiting[: self.batch_size], dtype=np.int64)
            self._run(batch)
            self.early.append(batch)
            del self.waiting[: self.batch_size]

    def _run(self, rows: np.ndarray) -> None:
        self.results.append((rows, self.forward(self.ids.array, self.starts.array[rows], self.lengths.array[rows])))
        self.forwarded += len(rows)

    def finish(self) -> np.ndarray | list[np.ndarray]:
        """Forward what is left (longest first), store new outputs in the cache; every row's output, by row."""
        pending = np.concatenate(self.pending) if self.pending else np.empty(0, dtype=np.int64)
        rest = pending[~np.isin(pending, np.concatenate(self.early))] if self.early else pending
        order = np.argsort(-self.lengths.array[rest], kind="stable")
        groups = [order]
        if self.bucket is not None and sharing():  # a second pass reads whole texts: their batches, its batches
            apart = ~np.isin(rest[order], np.fromiter(self.whole, dtype=np.int64, count=len(self.whole)))
            groups = [order[~apart], order[apart]]
        for group in groups:
            lengths = self.lengths.array[rest[group]] + self.extra
            for batch in padded_batches(lengths, self.batch_size, self.bucket, self.full + self.extra):
                self._run(rest[group[batch]])
        table = self._table()
        if self.cache.max_bytes > 0:
            for row in pending.tolist():
                self.cache.put(self.keys[row], table[row].copy())  # own memory: the cache keeps it
        return table

    def _table(self) -> np.ndarray | list[np.ndarray]:
        count = len(self.index)
        if self.tokens:
            states: list[np.ndarray] = [np.empty(0)] * count
            for rows, outputs in self.results:
                for row, output in zip(rows.tolist(), cast(list[np.ndarray], outputs), strict=True):
                    states[row] = output
            for row, output in self.hits.items():
                states[row] = output
            return states
        vectors = [(rows, cast(HostCopy, outputs).numpy()) for rows, outputs in self.results]  # (B, D) each
        width = next(iter(self.hits.values())).shape[0] if self.hits else vectors[0][1].shape[1]
        table = np.empty((count, width), dtype=np.float32)
        for rows, batch in vectors:
            table[rows] = batch
        for row, output in self.hits.items():
            table[row] = output
        return table
