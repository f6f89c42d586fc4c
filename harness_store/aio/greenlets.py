"""`Greenlets`: how an `AsyncStore` on PostgreSQL runs the sync Store's code on the event loop.

As SQLAlchemy's `greenlet_spawn`: a call runs in a greenlet whose `await_only` (in the
connector's hot paths and in SQLAlchemy's asyncio adapter) hands the driver's coroutine to the
task, which awaits it on the loop and switches back with the answer. But a greenlet here
serves one call after another, parked in between, instead of one made per call: making it
cost more than the rest of a call's own work around its round trip.

A call whose loop is closed under it stays parked in its greenlet, awaiting a driver coroutine
that loop never resumes; the next loop's first call ends it (`recover`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import Any

from greenlet import GreenletExit, getcurrent, greenlet  # type: ignore[import-untyped]

from ..errors import LoopClosedError

IDLE_GREENLETS = 16
"""Most greenlets kept parked between calls (one is busy per call in flight)."""


class Greenlets:
    """Sync calls run in parked greenlets on the event loop (see the module)."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        """The greenlets whose call is under way, each with the loop it runs on (see
        `recover`)."""

    async def run(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """`fn(*args, **kw)` in a greenlet, in this task's context (a context variable it sets
        is set for the task, as in `greenlet_spawn`); its awaits are awaited here, and a
        cancellation is thrown into it where it awaits."""
        current = getcurrent()
        worker = self._idle.pop() if self._idle else None
        if worker is None or worker.parent is not current:
            worker = _Worker(current)
        worker.gr_context = current.gr_context
        worker.job = (fn, args, kw)
        worker.loop = asyncio.get_running_loop()
        self._busy.add(worker)
        signal = worker.switch()
        while signal is not _DONE:
            worker.pending = signal
            try:
                value = await signal
            except GeneratorExit:
                # This coroutine is finalized by the garbage collector: its loop was closed
                # under the call. Nothing may be awaited here; `recover` ends the call.
                raise
            except BaseException:
                signal = worker.throw(*sys.exc_info())
            else:
                signal = worker.switch(value)
        worker.pending = None
        self._busy.discard(worker)
        worker.gr_context = None
        returned, raised = worker.returned, worker.raised
        worker.returned = worker.raised = None
        if len(self._idle) < IDLE_GREENLETS:
            self._idle.append(worker)
        if raised is not None:
            try:
                raise raised
            finally:
                raised = None
        return returned

    async def recover(self) -> None:
        """End the calls a closed loop left under way (each parked in its greenlet, awaiting
        a driver coroutine that loop will never resume), from this loop: the driver
        coroutine is closed (releasing its connection's lock), the connection it was using
        is closed (the server rolls its transaction back), then the call is unwound here,
        its errors (the closed connection's) dropped: nobody waits for it."""
        for worker in [each for each in self._busy if each.loop and each.loop.is_closed()]:
            self._busy.discard(worker)
            pending, worker.pending = worker.pending, None
            if pending is not None:
                _close_driver(pending)
            # greenlet's own error (the dead loop ran on another thread) leaves the call
            # parked, its connection already closed
            with contextlib.suppress(Exception):
                await _unwind(worker)
            worker.raised = worker.returned = None
            worker.gr_context = None

    def close(self) -> None:
        """End the parked greenlets."""
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.throw(GreenletExit)


async def _unwind(worker: _Worker) -> None:
    """Unwind a parked call on this loop: `LoopClosedError` thrown where it awaits, and
    whatever its handlers then await (on a closed connection, they fail at once) awaited
    here."""
    signal = worker.throw(LoopClosedError("the event loop of this call was closed"))
    while signal is not _DONE:
        try:
            value = await signal
        except BaseException:
            signal = worker.throw(*sys.exc_info())
        else:
            signal = worker.switch(value)


def _close_driver(pending: Any) -> None:
    """Close a driver coroutine a closed loop left suspended, and the connection it was
    using, found along the coroutines it awaits (methods of psycopg's cursors and
    connections, or of SQLAlchemy's adapters of them): its `pgconn` closes the socket
    without a round trip, and the server rolls back what was open on it."""
    pgconn = None
    awaited = pending
    while awaited is not None and pgconn is None:
        frame = getattr(awaited, "cr_frame", None)
        owner = frame.f_locals.get("self") if frame is not None else None
        for each in (
            owner,
            getattr(owner, "connection", None),
            getattr(owner, "_connection", None),
        ):
            pgconn = getattr(each, "pgconn", None)
            if pgconn is not None:
                break
        awaited = getattr(awaited, "cr_await", None)
    with contextlib.suppress(Exception):
        pending.close()
    if pgconn is not None:
        with contextlib.suppress(Exception):
            pgconn.finish()


_DONE = object()
"""What a `_Worker` hands back when its call has ended (anything else is an awaitable)."""


class _Worker(greenlet):  # type: ignore[misc]
    """A greenlet that runs one call after another, parked in between."""

    __sqlalchemy_greenlet_provider__ = True
    """What SQLAlchemy's `await_only` looks for: this greenlet's parent awaits for it."""

    def __init__(self, parent: greenlet) -> None:
        super().__init__(self._serve, parent)
        self.job: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None = None
        self.returned: Any = None
        self.raised: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop of the call under way."""
        self.pending: Any = None
        """What the call awaits now (a driver coroutine)."""

    def _serve(self) -> None:
        while True:
            assert self.job is not None
            fn, args, kw = self.job
            self.job = None
            try:
                self.returned = fn(*args, **kw)
            except BaseException as exc:
                self.raised = exc
            del fn, args, kw  # nothing of the call stays referenced while parked
            self.parent.switch(_DONE)
