"""The `transaction()` blocks of an `AsyncStore` on SQLite, on their lane.

A SQLite store has one writer, so blocks take turns (`Turn`) on one named thread, the block
lane, each block's calls run in its own context there (`Bound`). A loop closed while a block
is open never runs its task again, and the block would keep the write lock for ever: so the
open blocks are held here too (`OpenBlocks`), and the first call from another loop, or
`close()`, ends those of closed loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .lanes import Lanes


class Entry:
    """A `Store.transaction()` block entered on its lane (`enter`), and ended as cancelled
    (`abandon`) only if it was entered: a block cancelled or finalized before its lane ran it
    has nothing to end."""

    __slots__ = ("block", "entered")

    def __init__(self, block: AbstractContextManager[None]) -> None:
        self.block = block
        self.entered = False

    def enter(self) -> None:
        self.block.__enter__()
        self.entered = True

    def abandon(self) -> None:
        if self.entered:
            self.block.__exit__(asyncio.CancelledError, asyncio.CancelledError(), None)


class Opened:
    """A block (or nested savepoint) open on the block lane: the loop it was opened on, and
    how to end it there should that loop be closed first."""

    __slots__ = ("bound", "end", "ended", "loop")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, bound: Bound, end: Callable[[], Any]
    ) -> None:
        self.loop = loop
        self.bound = bound
        self.end = end
        self.ended = False
        """Whether its end is queued on the lane (or done)."""


class OpenBlocks:
    """The blocks open on the block lane, outermost first, held here (not only by their
    tasks' coroutines) so that a block whose loop was closed under it can still be ended.

    A task's block ends with the task; but a loop closed while the block is open never runs
    the task again. Its block then still holds the store's write lock on the block lane, and
    every later call would wait behind it for ever. So the first call from another loop (or
    `close()`) ends, innermost first, every block whose loop is closed: a rollback queued on
    the block's lane, where its connection is. A closed loop's coroutine finalized by the
    garbage collector ends its own block the same way, without waiting."""

    def __init__(self) -> None:
        self._open: list[Opened] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the last call came from: only a call from another one looks further."""

    def add(self, opened: Opened) -> None:
        self._open.append(opened)

    def abandon(self, opened: Opened) -> None:
        """Forget `opened`, queueing its end on its lane unless that is done already (no
        wait: safe from a finalizer)."""
        with contextlib.suppress(ValueError):
            self._open.remove(opened)
        if not opened.ended:
            opened.ended = True
            opened.bound.submit(opened.end)

    def adopt(self, turn: Turn) -> None:
        """On a call from a loop other than the last one's: end the blocks of closed loops,
        innermost first, and pass their turn on."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        self._loop = loop
        for opened in reversed(self._open):
            if opened.loop.is_closed():
                self.abandon(opened)
                turn.release(opened)
        turn.release_closed()


class Turn:
    """Which task's block is open on the block lane: one at a time, the others waiting on
    their own loops in the order they came. Unlike `asyncio.Lock` it is bound to no loop, and
    a waiter whose loop was closed is passed over, never handed the turn."""

    def __init__(self) -> None:
        self.holder: object | None = None
        self._waiting: deque[tuple[object, asyncio.Future[None]]] = deque()

    async def acquire(self, owner: object) -> None:
        if self.holder is None and not self._waiting:
            self.holder = owner
            return
        future = asyncio.get_running_loop().create_future()
        waiting = (owner, future)
        self._waiting.append(waiting)
        try:
            await future
        except BaseException:
            if self.holder is owner:  # handed the turn meanwhile: pass it on
                self.release(owner)
            else:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(waiting)
            raise

    def release(self, owner: object) -> None:
        """Give the turn up, if `owner` holds it, to the first waiter on a live loop."""
        if self.holder is not owner:
            return
        self.holder = None
        while self._waiting:
            owner, future = self._waiting.popleft()
            if future.done() or future.get_loop().is_closed():
                continue
            self.holder = owner
            try:
                _wake(future)
            except RuntimeError:  # its loop closed just now
                self.holder = None
                continue
            return

    def release_closed(self) -> None:
        """Drop the waiters whose loop is closed."""
        self._waiting = deque(each for each in self._waiting if not each[1].get_loop().is_closed())


def _wake(future: asyncio.Future[None]) -> None:
    """Hand `future` its result on its own loop (from it, or from another thread)."""
    loop = future.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        future.set_result(None)
    else:
        loop.call_soon_threadsafe(_woken, future)


def _woken(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Bound:
    """An open transaction block: the block lane its calls run on, and the context they run
    in (where the Store keeps the block's connection)."""

    def __init__(self, lane: Lanes) -> None:
        self._lane = lane
        self._context = contextvars.Context()

    def submit(self, work: Callable[[], Any]) -> None:
        """`work` on the block's lane, after what is queued there; nobody waits for it."""
        self._lane.post(functools.partial(self._context.run, work))

    async def run(self, work: Callable[[], Any]) -> Any:
        """`work` on the block's lane; cancelled before it starts, it never runs."""
        return await self._lane.run(functools.partial(self._context.run, work))

    async def finish(self, work: Callable[[], Any]) -> Any:
        """`work` (the end of a block) on the block's lane, run even when the caller is
        cancelled while waiting for it: a block that began must end, or it would keep the
        write lock."""
        return await asyncio.shield(self.run(work))
