"""`Lanes`: the named threads an `AsyncStore` on SQLite runs its calls on, with the leanest hop.

`loop.run_in_executor` over a `ThreadPoolExecutor` costs two futures chained by callbacks, a
lock and a thread-count check per call: about 140 µs a round trip on this project's machines,
against a 0.2–0.4 ms SQLite commit. Here a call is one `SimpleQueue.put` to the threads and
one `call_soon_threadsafe` back (about 70 µs), with the same promise: a call cancelled before
a thread takes it never runs; once taken, it runs to its end (its caller just stops waiting).

A lane given a `together` function (the writers) batches: when a thread takes a call marked
`joinable` and finds more such calls queued behind it (or takes one right after a batch, when
more are likely on their way), it hands them to `together`, which runs them in one
transaction with one commit, taking in those that queue meanwhile — what the sync Store's
group commit does for threads, done here by a thread for many tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

Outcome = tuple[Any, BaseException | None]
"""A call's result, or the exception it raised."""

Together = Callable[[list[Callable[[], Any]], Callable[[], list[Callable[[], Any]]]], list[Outcome]]
"""Runs calls in one transaction: the calls, and a function taking the joinable calls queued
meanwhile (appended to the list, to share the commit); returns each call's outcome in order."""


class Job:
    """One call queued for a lane, and where its outcome goes (no loop: nobody waits)."""

    __slots__ = ("future", "joinable", "loop", "work")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        future: asyncio.Future[Any] | None,
        work: Callable[[], Any],
        joinable: bool,
    ) -> None:
        self.loop = loop
        self.future = future
        self.work = work
        self.joinable = joinable

    def cancelled(self) -> bool:
        return self.future is not None and self.future.cancelled()

    def answer(self, result: Any, error: BaseException | None) -> None:
        if self.loop is None or self.future is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self.loop.call_soon_threadsafe(_settle, self.future, result, error)


class _Stop:
    """The end of a thread's work; `done` is told once the thread has left its loop."""

    __slots__ = ("done",)

    def __init__(self, done: Job | None) -> None:
        self.done = done


Entry = Job | _Stop


class Lanes:
    """`count` threads named `name` (`name-1`, … when more than one) taking calls from one
    queue (see the module)."""

    def __init__(self, count: int, name: str, together: Together | None = None) -> None:
        self._jobs: queue.SimpleQueue[Entry] = queue.SimpleQueue()
        names = [name] if count == 1 else [f"{name}-{k}" for k in range(1, count + 1)]
        serve = _serve if together is None else _serve_together
        extra = () if together is None else (together,)
        self._threads = [
            threading.Thread(target=serve, args=(self._jobs, *extra), name=each, daemon=True)
            for each in names
        ]
        for thread in self._threads:
            thread.start()
        # Daemon threads, so a store left open never holds the interpreter's exit; stopped
        # and joined when the lanes are dropped or at exit (before daemon threads are
        # killed), so a call already running still ends.
        self._stop = weakref.finalize(self, _stop, self._jobs, self._threads)

    async def run(self, work: Callable[[], Any], *, joinable: bool = False) -> Any:
        """`work()` on one of the threads; its result, or its exception raised here.
        `joinable` lets a batching lane commit it together with other joinable calls."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put(Job(loop, future, work, joinable))
        return await future

    def post(self, work: Callable[[], Any]) -> None:
        """`work()` on one of the threads, after what is queued; nobody waits for it."""
        self._jobs.put(Job(None, None, work, False))

    async def aclose(self) -> None:
        """Let the queued calls finish, then end the threads, without blocking the loop."""
        if not self._stop.alive:
            return
        self._stop.detach()
        loop = asyncio.get_running_loop()
        ended = []
        for _ in self._threads:
            future = loop.create_future()
            ended.append(future)
            self._jobs.put(_Stop(Job(loop, future, _nothing, False)))
        await asyncio.gather(*ended)
        for thread in self._threads:
            thread.join()  # each has left its loop: only its last instructions remain

    def close(self) -> None:
        """Let the queued calls finish, then end the threads (blocking: call it off the loop)."""
        self._stop()


def _nothing() -> None:
    return None


def _run(job: Job) -> None:
    try:
        result = job.work()
    except BaseException as exc:  # handed to the caller, as run_in_executor does
        job.answer(None, exc)
    else:
        job.answer(result, None)


def _serve(jobs: queue.SimpleQueue[Entry]) -> None:
    while True:
        job = jobs.get()
        if isinstance(job, _Stop):
            if job.done is not None:
                job.done.answer(None, None)
            return
        if not job.cancelled():  # cancelled before it started: it never runs
            _run(job)
        del job


def _serve_together(jobs: queue.SimpleQueue[Entry], together: Together) -> None:
    """`_serve`, batching joinable calls queued back to back (see the module)."""
    held: Entry | None = None
    last = 1  # how many calls the last batch committed
    while True:
        job = held if held is not None else jobs.get()
        held = None
        if isinstance(job, _Stop):
            if job.done is not None:
                job.done.answer(None, None)
            return
        if job.cancelled():
            continue
        if not job.joinable:
            _run(job)
            continue
        batch = [job]
        held = _take_joinable(jobs, batch)
        if len(batch) == 1 and last == 1:
            # Alone, and no batch just before: its own transaction, as a lone sync caller's.
            # Right after a batch, others are likely on their way: it opens a transaction
            # they can join before its COMMIT.
            _run(job)
            continue

        def late(batch: list[Job] = batch) -> list[Callable[[], Any]]:
            nonlocal held
            if held is not None:
                return []  # the queue's head is not joinable: keep the order
            before = len(batch)
            held = _take_joinable(jobs, batch)
            return [each.work for each in batch[before:]]

        try:
            outcomes = together([each.work for each in batch], late)
        except BaseException as exc:  # the batch could not be run: each call alone
            del exc
            for each in batch:
                _run(each)
            last = 1
            continue
        for each, (result, error) in zip(batch, outcomes, strict=True):
            each.answer(result, error)
        last = len(batch)
        del job, batch, outcomes


def _take_joinable(jobs: queue.SimpleQueue[Entry], batch: list[Job]) -> Entry | None:
    """Move the joinable calls at the queue's head into `batch` without waiting; the first
    other entry taken is returned, to be served next."""
    while True:
        try:
            entry = jobs.get_nowait()
        except queue.Empty:
            return None
        if isinstance(entry, _Stop) or not entry.joinable:
            return entry
        if not entry.cancelled():
            batch.append(entry)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _stop(jobs: queue.SimpleQueue[Entry], threads: list[threading.Thread]) -> None:
    for _ in threads:
        jobs.put(_Stop(None))
    current = threading.current_thread()
    for thread in threads:
        if thread is not current:
            thread.join()
