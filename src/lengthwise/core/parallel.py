"""Work on many queries spread over threads, in order: the search stage of `LongIndex.search` and of the service.

A search's per-query work (rescoring candidate windows exactly, BM25 scores, fusion, passages) is numpy and torch
kernels, which release the GIL, with some Python between them; so several threads searching different queries of a
batch use several cores. Each query is searched by the same code as alone, so the hits do not depend on the number
of threads (``tests/search/test_search_parallel.py`` checks it). The pools are made once per size and shared by the
process.

Importing this module loads neither numpy nor torch.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["SEARCH_THREADS_AT_MOST", "default_search_threads", "each", "search_pool"]

SEARCH_THREADS_AT_MOST = 32  # beyond this a batch of queries (at most 64 in the service) gains little per thread

T = TypeVar("T")
R = TypeVar("R")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else `os.cpu_count`)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_search_threads(processes: int = 1) -> int:
    """Search threads per process when none are asked: its share of the available cores among `processes`, less one
    for its model thread (at least 1, at most `SEARCH_THREADS_AT_MOST`). On two cores that is one: there a second
    search thread cost throughput (docs/serving.md, "Search threads on two cores")."""
    return max(1, min(SEARCH_THREADS_AT_MOST, available_cores() // max(1, processes) - 1))


POOL_THREAD = "lengthwise-search-pool"  # the pools' thread names start with this


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix=POOL_THREAD)


def search_pool(threads: int | None, items: int) -> Executor | None:
    """The shared pool of `threads` search threads for `items` queries (None: default threads), or None where one
    thread would do (one thread asked, or a single query): the caller then works on its own thread. A search
    already running on a pool's thread gets None too: it must not wait on the threads it may be holding."""
    threads = default_search_threads() if threads is None else threads
    if threads <= 1 or items <= 1 or threading.current_thread().name.startswith(POOL_THREAD):
        return None
    return _pool(threads)


def each(pool: Executor | None, func: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[func(item) for item in items]``, in order, on `pool`'s threads when given (the first error raised)."""
    return list(pool.map(func, items)) if pool is not None else [func(item) for item in items]
