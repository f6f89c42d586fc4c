"""`ThreadRunner`: how an `AsyncStore` on SQLite, whose driver has no asyncio API, runs the
sync Store's code without blocking the event loop: every call on one of four named threads
(`lanes`):

- `harness_store-writer-1` and `-2`: the Store's writes. Each takes the writes queued when it
  takes one and runs them in one transaction with one COMMIT (`together`), each in its own
  savepoint, so concurrent tasks' checkpoints share commits as the sync Store's threads do in
  group commit, and a failing call is undone alone; while one commits, the other gathers the
  next batch (and two lone writes meet in the Store's own group commit). A lone write runs as
  a lone sync caller's does.
- `harness_store-reader`: reads, on a read-only twin of the file, so they never queue behind
  a write (a store with no twin — in memory, or opened read-only — reads on the writers).
- `harness_store-block`: the calls of an open `transaction()` block, run in the block's own
  context (where the Store keeps the block's connection; see `block_lane`).

A cancelled call runs to its end on its thread, or never starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager
from itertools import islice
from typing import TYPE_CHECKING, Any

from ..connector.driver import LATE_ROUNDS
from ..engine import sqlite_path
from ..errors import LoopClosedError, StoreClosedError, StoreError
from ..store import read_only_twin
from .block_lane import Bound, Entry, OpenBlocks, Opened, Turn
from .lanes import Lanes, Outcome
from .methods import READ, WRITE

if TYPE_CHECKING:
    from ..store import Store

THREAD = "harness_store"
"""The prefix of every thread an `AsyncStore` starts."""
WRITE_THREADS = 2
"""Threads taking writes: while one commits, the other gathers the writes queued meanwhile
(and under load the scheduler wakes one of two rested threads sooner than one busy thread)."""
READ_THREADS = 1
"""Threads reading through the read-only twin."""


class ThreadRunner:
    """Runs Store calls on named threads (see the module)."""

    def __init__(self) -> None:
        self._target = _Target()
        self._writes = Lanes(
            WRITE_THREADS, f"{THREAD}-writer", functools.partial(_together, self._target)
        )
        self._reads = self._writes
        self._block = Lanes(1, f"{THREAD}-block")
        self._turn = Turn()
        """Held by the task whose block is open on the block lane."""
        self._open = OpenBlocks()
        self._bound: contextvars.ContextVar[Bound | None] = contextvars.ContextVar(
            "harness_store_bound", default=None
        )
        self.reader: Store | None = None
        self._closed = False

    @classmethod
    async def open(cls, opener: Callable[[], Store], *, read_only: bool) -> ThreadRunner:
        """Open the Store on its writer lane (and, for a writable file, its read-only twin on
        the reader lanes): no thread beyond the lanes is started, not even to open."""
        runner = cls()
        try:
            runner._target.store = await runner._writes.run(opener)
            store = runner.store
            if not read_only and sqlite_path(store.url) is not None:
                runner._reads = Lanes(READ_THREADS, f"{THREAD}-reader")
                runner.reader = await runner._reads.run(functools.partial(read_only_twin, store))
        except BaseException:
            await runner.aclose()
            raise
        return runner

    @property
    def store(self) -> Store:
        store = self._target.store
        if store is None:
            raise StoreClosedError("this Store is closed")
        return store

    @property
    def engine(self) -> Any:
        return self.store.engine

    @property
    def write_engine(self) -> Any:
        return self.store.write_engine

    def _place(self, kind: str) -> tuple[Callable[..., Any], Store, bool]:
        """Where a call runs: the block's lane in a block, else by kind; and whether the
        writer may commit it together with others."""
        if self._closed:
            raise StoreClosedError("this Store is closed")
        self._open.adopt(self._turn)
        bound = self._bound.get()
        if bound is not None:
            return bound.run, self.store, False
        if kind == READ and self.reader is not None:
            return self._reads.run, self.reader, False
        return self._writes.run, self.store, kind == WRITE

    async def call(self, kind: str, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        hop, target, joinable = self._place(kind)
        work = functools.partial(getattr(target, name), *args, **kw)
        if joinable:
            return await hop(work, joinable=True)
        return await hop(work)

    async def iterate(
        self, kind: str, name: str, page: int, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> AsyncIterator[Any]:
        hop, target, _ = self._place(kind)
        pages = _Pages(getattr(target, name)(*args, **kw), page)
        try:
            while True:
                chunk = await hop(pages.pull)
                for item in chunk:
                    yield item
                if len(chunk) < page:
                    return
        finally:
            pages.abandon()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if self._closed:
            raise StoreClosedError("this Store is closed")
        self._open.adopt(self._turn)
        bound = self._bound.get()
        if bound is not None:  # nested: a savepoint, on the same lane
            savepoint = Entry(self.store.transaction())
            nested = Opened(asyncio.get_running_loop(), bound, savepoint.abandon)
            self._open.add(nested)
            try:
                try:
                    await bound.run(savepoint.enter)
                except BaseException:
                    # Cancelled while the savepoint was being opened: once it is, close it on
                    # the block's lane, before the outer block ends (the lane runs in order);
                    # left open, it would be ended by the garbage collector on whatever
                    # thread, on the connection another block is using by then.
                    self._open.abandon(nested)
                    raise
                async with self._ending(bound, savepoint.block, nested):
                    yield
            finally:
                self._open.abandon(nested)
            return
        bound = Bound(self._block)
        entry = Entry(self.store.transaction())
        opened = Opened(asyncio.get_running_loop(), bound, entry.abandon)
        await self._turn.acquire(opened)
        self._open.add(opened)
        try:
            try:
                await bound.run(entry.enter)
            except BaseException:
                # Cancelled while waiting for the write lock: once `enter` runs, end the
                # block (the lane runs in order, so before the next block begins).
                self._open.abandon(opened)
                raise
            token = self._bound.set(bound)
            try:
                async with self._ending(bound, entry.block, opened):
                    yield
            finally:
                with contextlib.suppress(ValueError):  # finalized in another context
                    self._bound.reset(token)
        finally:
            self._open.abandon(opened)
            self._turn.release(opened)

    @asynccontextmanager
    async def _ending(
        self, bound: Bound, block: AbstractContextManager[None], opened: Opened
    ) -> AsyncIterator[None]:
        """The body of an open block, and its end on the block's lane: awaited when the body
        ends on a live loop; queued without waiting when the block's coroutine is finalized
        by the garbage collector (its loop was closed under it: nothing may be awaited then),
        or when it was already ended for a closed loop."""
        try:
            yield
        except BaseException as exc:
            if isinstance(exc, GeneratorExit) or opened.ended:
                self._open.abandon(opened)
                raise
            opened.ended = True
            await bound.finish(functools.partial(block.__exit__, type(exc), exc, None))
            raise
        if opened.ended:
            raise LoopClosedError(
                "this transaction() block was rolled back: the event loop it was opened on "
                "was closed while it was open"
            )
        opened.ended = True
        await bound.finish(functools.partial(block.__exit__, None, None, None))

    async def aclose(self) -> None:
        """Close the stores on their own lanes (after the calls queued there), then end every
        lane's thread."""
        if not self._closed:
            self._open.adopt(self._turn)
        self._closed = True
        try:
            if self._target.store is not None:
                await self._writes.run(self._target.store.close)
            if self.reader is not None:
                await self._reads.run(self.reader.close)
        finally:
            await self._block.aclose()
            await self._reads.aclose()
            await self._writes.aclose()


class _Target:
    """The Store the writer lane commits batches on (set once opened; the lane's thread holds
    this, not the runner, so an `AsyncStore` dropped unclosed can still be collected)."""

    __slots__ = ("store",)

    def __init__(self) -> None:
        self.store: Store | None = None


def _together(
    target: _Target,
    calls: list[Callable[[], Any]],
    late: Callable[[], list[Callable[[], Any]]],
) -> list[Outcome]:
    """Run queued writes in one transaction with one COMMIT: each in its own savepoint (the
    Store's rule for a write inside a block), so a failing call is undone alone and gets its
    own error; joined, a few rounds, by the writes that queued meanwhile. Raises only when
    the transaction could not begin, before any call ran (the lane then runs each alone)."""
    if target.store is None:
        raise StoreError("this Store is not open")
    block = target.store.transaction()
    block.__enter__()
    outcomes: list[Outcome] = []
    try:
        for rounds in range(LATE_ROUNDS + 1):
            for work in calls[len(outcomes) :]:
                try:
                    outcomes.append((work(), None))
                except Exception as exc:  # its savepoint is undone; the others go on
                    outcomes.append((None, exc))
            if rounds < LATE_ROUNDS:
                joined = late()
                if not joined:
                    break
                calls.extend(joined)
    except BaseException as exc:
        block.__exit__(type(exc), exc, None)
        raise
    try:
        block.__exit__(None, None, None)
    except BaseException as exc:
        return [
            (None, error if error is not None else _not_committed(exc)) for _, error in outcomes
        ]
    return outcomes


def _not_committed(exc: BaseException) -> BaseException:
    """A caller's own copy of the error that kept its batch from committing."""
    if isinstance(exc, StoreError):
        return copy.copy(exc)
    return StoreError(f"not committed: {type(exc).__name__}: {exc}")


class _Pages:
    """A sync generator read a page at a time on threads, and closed exactly once, by
    whichever side finishes last: the caller abandoning it (`break`, cancellation) while no
    page is being read, or the thread reading a page when it was abandoned meanwhile — a
    cancelled caller stops waiting for that page, but the thread is still inside the
    generator, which cannot be closed under it."""

    def __init__(self, iterator: Iterator[Any], page: int) -> None:
        self._iterator = iterator
        self._page = page
        self._lock = threading.Lock()
        self._reading = False
        self._abandoned = False

    def pull(self) -> list[Any]:
        """The next page (on a thread); nothing once abandoned."""
        with self._lock:
            if self._abandoned:
                return []
            self._reading = True
        try:
            return list(islice(self._iterator, self._page))
        finally:
            with self._lock:
                self._reading = False
                close = self._abandoned
            if close:
                self._close()

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            close = not self._reading
        if close:
            self._close()

    def _close(self) -> None:
        close = getattr(self._iterator, "close", None)
        if close is not None:
            close()
