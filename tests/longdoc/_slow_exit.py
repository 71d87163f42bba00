"""A `ModelLoader` for `encode`'s worker processes whose normal exit is slow, to test that the pool lets its workers
exit rather than terminating them (issue 62.10).

It loads plain, creates a lock of the spawn context (a named semaphore the resource tracker follows, as tqdm's lock
in a worker is) and registers a finalizer that sleeps a second before the worker's other finalizers run at a normal
exit (multiprocessing runs the higher exit priority first). A pool that terminates its workers kills them inside that
second, before the lock's finalizer unregisters it, and the resource tracker warns of a leaked semaphore at shutdown.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing import util
from typing import Any

HELD: list[Any] = []  # the worker's lock, alive until the worker exits


def load_slowly_exiting(name: Any, **kwargs: Any) -> Any:
    from lengthwise.core.models import load_plain_model

    HELD.append(multiprocessing.get_context("spawn").Lock())
    util.Finalize(None, time.sleep, args=(1.0,), exitpriority=100)
    return load_plain_model(name, **kwargs)
