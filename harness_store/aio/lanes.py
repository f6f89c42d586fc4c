"""`Lanes`: the threads an `AsyncStore` on SQLite runs its calls on, with the leanest hop.

`loop.run_in_executor` over a `ThreadPoolExecutor` costs two futures chained by callbacks, a
lock and a thread-count check per call: about 140 µs a round trip on this project's machines,
against a 0.2–0.4 ms SQLite commit. Here a call is one `SimpleQueue.put` to the threads and
one `call_soon_threadsafe` back (about 70 µs), with the same promise: a call cancelled before
a thread takes it never runs; once taken, it runs to its end (its caller just stops waiting).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


class Lanes:
    """`count` threads taking calls from one queue (see the module)."""

    def __init__(self, count: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=_serve, args=(self._jobs,), name=f"{name}-{k}", daemon=True)
            for k in range(count)
        ]
        for thread in self._threads:
            thread.start()
        # Daemon threads, so a store left open never holds the interpreter's exit; stopped
        # and joined when the lanes are dropped or at exit (before daemon threads are
        # killed), so a call already running still ends.
        self._stop = weakref.finalize(self, _stop, self._jobs, self._threads)

    async def run(self, work: Callable[[], Any]) -> Any:
        """`work()` on one of the threads; its result, or its exception raised here."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((loop, future, work))
        return await future

    def close(self) -> None:
        """Let the queued calls finish, then end the threads (blocking: call it off the loop)."""
        self._stop()


def _serve(jobs: queue.SimpleQueue[Job | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        loop, future, work = job
        if future.cancelled():  # cancelled before it started: it never runs
            continue
        try:
            result = work()
        except BaseException as exc:  # handed to the caller, as run_in_executor does
            _answer(loop, future, None, exc)
        else:
            _answer(loop, future, result, None)
        del job, work, future


def _answer(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _stop(jobs: queue.SimpleQueue[Job | None], threads: list[threading.Thread]) -> None:
    for _ in threads:
        jobs.put(None)
    current = threading.current_thread()
    for thread in threads:
        if thread is not current:
            thread.join()
