"""Dynamic batching: the queries of concurrent requests gathered for a few milliseconds and run as one batch on a
single worker thread, off the event loop.

Requests are grouped by a key (what they ask besides their texts: k, mode, passages …); each group's texts go to
the handler in one call, so the encoder embeds them in one forward pass. One worker thread runs every batch: the
model and the index are used by one thread at a time. A request whose group fails is run again on its own, so one
bad query fails only its own request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Batcher"]

Handler = Callable[[Hashable, list[str]], Sequence[Any]]
_STOP = None  # put on the queue by `stop`: the loop ends after the jobs before it


@dataclass
class _Job:
    key: Hashable
    texts: list[str]
    future: asyncio.Future[list[Any]] = field(repr=False)


class Batcher:
    """Gather `submit`ted texts for up to `wait_s` (or `max_batch` texts) and run them through `handler` together.

    Args:
        handler: ``handler(key, texts) -> one result per text``; called on the worker thread.
        max_batch: Texts per batch at most (a larger request runs alone).
        wait_s: How long the first request of a batch waits for others.
    """

    def __init__(self, handler: Handler, *, max_batch: int = 64, wait_s: float = 0.002) -> None:
        self.handler, self.max_batch, self.wait_s = handler, max_batch, wait_s
        self._queue: asyncio.Queue[_Job | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lengthwise-worker")
        self.batches = 0  # batches run, texts in them and seconds the worker spent: /info shows how batching works
        self.texts = 0
        self.busy_s = 0.0

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Finish the batches already queued, then stop the loop and the worker thread."""
        if self._queue is not None and self._task is not None:
            await self._queue.put(_STOP)
            await asyncio.gather(self._task, return_exceptions=True)
        self._executor.shutdown(wait=True)

    async def run(self, func: Callable[[], Any]) -> Any:
        """Run `func` on the worker thread (not batched): anything else that touches the model or the index."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, func)

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
        loop = asyncio.get_running_loop()
        while (jobs := await self._gather()) is not None:
            try:
                outcomes = await loop.run_in_executor(self._executor, self._run, jobs)
            except Exception as error:  # the worker itself failed: these requests fail, the next batch is tried
                outcomes = [error] * len(jobs)
            for job, outcome in zip(jobs, outcomes, strict=True):
                if job.future.done():  # the client went away
                    continue
                if isinstance(outcome, BaseException):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)

    def _run(self, jobs: list[_Job]) -> list[Any]:
        """On the worker thread: one outcome (results or the error) per job, the time spent counted."""
        started = time.perf_counter()
        self.batches += 1
        self.texts += sum(len(job.texts) for job in jobs)
        try:
            return self._run_groups(jobs)
        finally:
            self.busy_s += time.perf_counter() - started

    def _run_groups(self, jobs: list[_Job]) -> list[Any]:
        """Each key's texts in one handler call; a failed group's jobs again one by one."""
        groups: dict[Hashable, list[int]] = {}
        for number, job in enumerate(jobs):
            groups.setdefault(job.key, []).append(number)
        outcomes: list[Any] = [None] * len(jobs)
        for key, members in groups.items():
            texts = [text for number in members for text in jobs[number].texts]
            try:
                results = list(self.handler(key, texts))
            except Exception as error:
                if len(members) == 1:
                    outcomes[members[0]] = error
                    continue
                for number in members:
                    outcomes[number] = self._alone(jobs[number])
                continue
            start = 0
            for number in members:
                outcomes[number] = results[start : start + len(jobs[number].texts)]
                start += len(jobs[number].texts)
        return outcomes

    def _alone(self, job: _Job) -> Any:
        try:
            return list(self.handler(job.key, job.texts))
        except Exception as error:
            return error
