"""Dynamic batching: the queries of concurrent requests gathered for a few milliseconds and run as one batch, in two
stages, off the event loop: the model's one thread, then one of the search stage's threads.

Requests are grouped by a key (what they ask besides their texts: k, mode, passages …); each group's texts go to
the handler together, so the encoder embeds them in one forward pass. A handler may have two stages (`Stages`):
``prepare`` (embedding the queries: the model's thread) and ``finish`` (searching the index with those vectors: a
search thread). The two run as a pipeline: while batches are searched the next is gathered and embedded, so the
encoder's and the index's work overlap instead of taking turns. The model is used by its one thread only. The search
stage has `search_threads` threads: up to that many batches are searched at once (`finish` must allow it; the
service's handler also spreads each batch's queries over the same number of threads, `LongIndex.search`). A request
whose group fails in either stage is run again on its own, so one bad query fails only its own request.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Batcher", "Stages"]

Handler = Callable[[Hashable, list[str]], Sequence[Any]]
_STOP = None  # put on the queue by `stop`: the loop ends after the jobs before it


@runtime_checkable
class Stages(Protocol):
    """A handler in two stages, pipelined by the `Batcher`."""

    def prepare(self, key: Hashable, texts: list[str]) -> Sequence[Any] | None:
        """The first stage, on the model's thread: one item per text (e.g. its vector), or None."""
        ...

    def finish(self, key: Hashable, texts: list[str], prepared: Sequence[Any] | None) -> Sequence[Any]:
        """The second stage, on a search thread: one result per text, from `prepare`'s items for them (called from
        several threads at once when the batcher has several)."""
        ...


class _OneStage:
    """A plain ``handler(key, texts)`` as `Stages`: nothing to prepare, everything in the second stage."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def prepare(self, key: Hashable, texts: list[str]) -> None:
        return None

    def finish(self, key: Hashable, texts: list[str], prepared: Sequence[Any] | None) -> Sequence[Any]:
        return self.handler(key, texts)


@dataclass
class _Job:
    key: Hashable
    texts: list[str]
    future: asyncio.Future[list[Any]] = field(repr=False)


@dataclass
class _Unit:
    """Jobs of one key that go through the second stage together, with their first stage's items (or its error)."""

    key: Hashable
    jobs: list[int]
    texts: list[str]
    prepared: Sequence[Any] | None = None
    error: Exception | None = None


class Batcher:
    """Gather `submit`ted texts for up to `wait_s` (or `max_batch` texts) and run them through `handler` together.

    Args:
        handler: ``handler(key, texts) -> one result per text`` (one stage, on a search thread), or `Stages`.
        max_batch: Texts per batch at most (a larger request runs alone).
        wait_s: How long the first request of a batch waits for others.
        search_threads: Batches searched at once (the second stage's threads); at most this many batches are
            being searched, and one more embedded or waiting, between gathering and answer.
    """

    def __init__(
        self, handler: Handler | Stages, *, max_batch: int = 64, wait_s: float = 0.002, search_threads: int = 1
    ) -> None:
        self.stages: Stages = handler if isinstance(handler, Stages) else _OneStage(handler)
        self.max_batch, self.wait_s, self.in_flight = max_batch, wait_s, search_threads + 1
        self._queue: asyncio.Queue[_Job | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._model = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lengthwise-model")
        self._search = ThreadPoolExecutor(max_workers=search_threads, thread_name_prefix="lengthwise-search")
        self.batches = 0  # batches run, texts in them and seconds each stage's threads spent: /info shows them
        self.texts = 0
        self.busy_s = {"model": 0.0, "search": 0.0}  # the search stage's: summed over its threads
        self._busy_lock = threading.Lock()

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Finish the batches already queued, then stop the loop and the threads."""
        if self._queue is not None and self._task is not None:
            await self._queue.put(_STOP)
            await asyncio.gather(self._task, return_exceptions=True)
        self._model.shutdown(wait=True)
        self._search.shutdown(wait=True)

    async def run(self, func: Callable[[], Any]) -> Any:
        """Run `func` on the model's thread (not batched): anything else that touches the model."""
        return await asyncio.get_running_loop().run_in_executor(self._model, func)

    async def submit(self, key: Hashable, texts: list[str]) -> list[Any]:
        """One result per text, computed in a batch with the texts of concurrent requests of the same `key`."""
        assert self._queue is not None, "Batcher.start() first"
        job = _Job(key, texts, asyncio.get_running_loop().create_future())
        await self._queue.put(job)
        return await job.future

    async def _gather(self) -> list[_Job] | None:
        """The next batch: the first job waiting, and those that come within `wait_s`; None once stopped."""
        assert self._queue is not None
        first = await self._queue.get()
        if first is _STOP:
            return None
        jobs, count = [first], len(first.texts)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while count < self.max_batch:
            if self._queue.empty():
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self._queue.get(), left)
                except asyncio.TimeoutError:
                    break
            else:
                job = self._queue.get_nowait()
            if job is _STOP:  # stopping: this batch is the last
                self._queue.put_nowait(job)
                break
            jobs.append(job)
            count += len(job.texts)
        return jobs

    async def _loop(self) -> None:
        """Gather a batch, prepare it, hand it to a search thread and gather the next while it is searched; at
        most `in_flight` batches between gathering and answer."""
        loop = asyncio.get_running_loop()
        searching: set[asyncio.Future[None]] = set()
        while (jobs := await self._gather()) is not None:
            self.batches += 1
            self.texts += sum(len(job.texts) for job in jobs)
            try:
                units = await loop.run_in_executor(self._model, self._timed, "model", self._prepare, jobs)
            except Exception as error:  # the thread itself failed: these requests fail, the next batch is tried
                self._answer(jobs, [error] * len(jobs))
                continue
            done = loop.run_in_executor(self._search, self._timed, "search", self._finish, jobs, units)
            searching.add(asyncio.ensure_future(self._answered(jobs, done)))
            while len(searching) >= self.in_flight:
                finished, _ = await asyncio.wait(searching, return_when=asyncio.FIRST_COMPLETED)
                searching -= finished
        await asyncio.gather(*searching)

    async def _answered(self, jobs: list[_Job], done: asyncio.Future[list[Any]]) -> None:
        try:
            outcomes = await done
        except Exception as error:
            outcomes = [error] * len(jobs)
        self._answer(jobs, outcomes)

    @staticmethod
    def _answer(jobs: list[_Job], outcomes: list[Any]) -> None:
        for job, outcome in zip(jobs, outcomes, strict=True):
            if job.future.done():  # the client went away
                continue
            if isinstance(outcome, BaseException):
                job.future.set_exception(outcome)
            else:
                job.future.set_result(outcome)

    def _timed(self, thread: str, func: Callable[..., Any], *args: Any) -> Any:
        """`func(*args)`, its seconds added to `thread`'s busy time."""
        started = time.perf_counter()
        try:
            return func(*args)
        finally:
            with self._busy_lock:
                self.busy_s[thread] += time.perf_counter() - started

    def _prepare(self, jobs: list[_Job]) -> list[_Unit]:
        """On the model's thread: each key's texts prepared together; a failed group's jobs again one by one."""
        groups: dict[Hashable, list[int]] = {}
        for number, job in enumerate(jobs):
            groups.setdefault(job.key, []).append(number)
        units = []
        for key, members in groups.items():
            unit = _Unit(key, members, [text for number in members for text in jobs[number].texts])
            try:
                unit.prepared = self.stages.prepare(key, unit.texts)
                units.append(unit)
            except Exception as error:
                if len(members) == 1:
                    units.append(_Unit(key, members, unit.texts, error=error))
                    continue
                for number in members:
                    alone = _Unit(key, [number], jobs[number].texts)
                    try:
                        alone.prepared = self.stages.prepare(key, alone.texts)
                    except Exception as own:
                        alone.error = own
                    units.append(alone)
        return units

    def _finish(self, jobs: list[_Job], units: list[_Unit]) -> list[Any]:
        """On a search thread: one outcome (results or the error) per job."""
        outcomes: list[Any] = [None] * len(jobs)
        for unit in units:
            if unit.error is not None:
                outcomes[unit.jobs[0]] = unit.error
                continue
            try:
                results = list(self.stages.finish(unit.key, unit.texts, unit.prepared))
            except Exception as error:
                if len(unit.jobs) == 1:
                    outcomes[unit.jobs[0]] = error
                    continue
                results = None
            start = 0
            for number in unit.jobs:
                count = len(jobs[number].texts)
                if results is not None:
                    outcomes[number] = results[start : start + count]
                else:
                    part = None if unit.prepared is None else unit.prepared[start : start + count]
                    outcomes[number] = self._alone(unit.key, jobs[number].texts, part)
                start += count
        return outcomes

    def _alone(self, key: Hashable, texts: list[str], prepared: Sequence[Any] | None) -> Any:
        try:
            return list(self.stages.finish(key, texts, prepared))
        except Exception as error:
            return error
