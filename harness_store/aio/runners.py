"""How an `AsyncStore` runs the sync Store's code without blocking the event loop.

`ThreadRunner` (SQLite, whose driver has no asyncio API) runs every call on one of four named
threads (`lanes`):

- `harness_store-writer-1` and `-2`: the Store's writes. Each takes the writes queued when it
  takes one and runs them in one transaction with one COMMIT (`together`), each in its own
  savepoint, so concurrent tasks' checkpoints share commits as the sync Store's threads do in
  group commit, and a failing call is undone alone; while one commits, the other gathers the
  next batch (and two lone writes meet in the Store's own group commit). A lone write runs as
  a lone sync caller's does.
- `harness_store-reader`: reads, on a read-only twin of the file, so they never queue behind
  a write (a store with no twin — in memory, or opened read-only — reads on the writers).
- `harness_store-block`: the calls of an open `transaction()` block, run in the block's own
  context (where the Store keeps the block's connection). A SQLite store has one writer, so
  blocks take turns on this one lane; a task waiting for its turn waits on the loop.

`GreenletRunner` (PostgreSQL): the same Store and connector code runs on the event loop, each
call in a greenlet (`greenlets`: parked between calls and reused, not one made per call) whose
awaits the calling task awaits — no thread per call. The hot paths (`run_driver`,
`driver_read`) run on the connector's kept connections, which there are psycopg's own
`AsyncConnection`s awaited straight from the greenlet: one switch to the loop and back per
round trip. The rest goes through SQLAlchemy's asyncio engine (its `sync_engine` is the
Store's engine), whose adapter awaits the same way.

A cancelled call is all or nothing: on a thread it runs to its end (or never starts); on the
loop the cancellation unwinds the call's transaction, which the database rolls back whole.

A loop closed while a block is open (or a call is under way) never runs its task again: the
runners hold the open blocks themselves, and the first call from another loop, or `close()`,
rolls back those of closed loops (`_OpenBlocks`, `GreenletRunner._adopt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager
from itertools import islice
from typing import TYPE_CHECKING, Any

from ..connector.driver import LATE_ROUNDS
from ..engine import sqlite_path
from ..errors import LoopClosedError, StoreError
from ..store import read_only_twin
from ..store.base import block_state, restore_block_state
from .lanes import Lanes, Outcome
from .methods import READ, WRITE

if TYPE_CHECKING:
    from ..connector import BlockState
    from ..store import Store

THREAD = "harness_store"
"""The prefix of every thread an `AsyncStore` starts."""
WRITE_THREADS = 2
"""Threads taking writes: while one commits, the other gathers the writes queued meanwhile
(and under load the scheduler wakes one of two rested threads sooner than one busy thread)."""
READ_THREADS = 1
"""Threads reading through the read-only twin."""


def _take(iterator: Iterator[Any], count: int) -> list[Any]:
    return list(islice(iterator, count))


class ThreadRunner:
    """Runs Store calls on named threads (see the module)."""

    def __init__(self) -> None:
        self._target = _Target()
        self._writes = Lanes(
            WRITE_THREADS, f"{THREAD}-writer", functools.partial(_together, self._target)
        )
        self._reads = self._writes
        self._block = Lanes(1, f"{THREAD}-block")
        self._turn = _Turn()
        """Held by the task whose block is open on the block lane."""
        self._open = _OpenBlocks()
        self._bound: contextvars.ContextVar[_Bound | None] = contextvars.ContextVar(
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
            raise StoreError("this Store is closed")
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
            raise StoreError("this Store is closed")
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
            raise StoreError("this Store is closed")
        self._open.adopt(self._turn)
        bound = self._bound.get()
        if bound is not None:  # nested: a savepoint, on the same lane
            savepoint = _Entry(self.store.transaction())
            nested = _Opened(asyncio.get_running_loop(), bound, savepoint.abandon)
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
        bound = _Bound(self._block)
        entry = _Entry(self.store.transaction())
        opened = _Opened(asyncio.get_running_loop(), bound, entry.abandon)
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
        self, bound: _Bound, block: AbstractContextManager[None], opened: _Opened
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


class _Entry:
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


class _Opened:
    """A block (or nested savepoint) open on the block lane: the loop it was opened on, and
    how to end it there should that loop be closed first."""

    __slots__ = ("bound", "end", "ended", "loop")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, bound: _Bound, end: Callable[[], Any]
    ) -> None:
        self.loop = loop
        self.bound = bound
        self.end = end
        self.ended = False
        """Whether its end is queued on the lane (or done)."""


class _OpenBlocks:
    """The blocks open on the block lane, outermost first, held here (not only by their
    tasks' coroutines) so that a block whose loop was closed under it can still be ended.

    A task's block ends with the task; but a loop closed while the block is open never runs
    the task again. Its block then still holds the store's write lock on the block lane, and
    every later call would wait behind it for ever. So the first call from another loop (or
    `close()`) ends, innermost first, every block whose loop is closed: a rollback queued on
    the block's lane, where its connection is. A closed loop's coroutine finalized by the
    garbage collector ends its own block the same way, without waiting."""

    def __init__(self) -> None:
        self._open: list[_Opened] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the last call came from: only a call from another one looks further."""

    def add(self, opened: _Opened) -> None:
        self._open.append(opened)

    def abandon(self, opened: _Opened) -> None:
        """Forget `opened`, queueing its end on its lane unless that is done already (no
        wait: safe from a finalizer)."""
        with contextlib.suppress(ValueError):
            self._open.remove(opened)
        if not opened.ended:
            opened.ended = True
            opened.bound.submit(opened.end)

    def adopt(self, turn: _Turn) -> None:
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


class _Turn:
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
            return _take(self._iterator, self._page)
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


class _Bound:
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


class GreenletRunner:
    """Runs Store calls on the event loop over SQLAlchemy's asyncio engine (see the module)."""

    def __init__(self, store: Store, engine: Any) -> None:
        self.store = store
        self.async_engine = engine
        self.engine = engine
        self.write_engine = engine
        from .greenlets import Greenlets  # greenlet comes with the PostgreSQL extra

        self._greenlets = Greenlets()
        self._open: list[_LoopBlock] = []
        """The blocks open, outermost first (see `_adopt`)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the last call came from: only a call from another one looks further."""

    async def _here(self) -> None:
        if asyncio.get_running_loop() is not self._loop:
            await self._adopt()

    async def _adopt(self) -> None:
        """On a call from a loop other than the last one's: roll back, innermost first, every
        block whose loop was closed while it was open, on this loop (its connection is idle in
        its transaction: the loop's task never runs again to end it), and give the connection
        back; one that cannot be rolled back is dropped, and the server rolls it back."""
        self._loop = asyncio.get_running_loop()
        await self._greenlets.recover()
        orphans = [each for each in reversed(self._open) if each.loop.is_closed()]
        for orphan in orphans:
            orphan.ended = True
            with contextlib.suppress(ValueError):
                self._open.remove(orphan)
        for orphan in orphans:
            if not orphan.entered:
                continue
            end = functools.partial(
                orphan.block.__exit__, LoopClosedError, LoopClosedError("closed loop"), None
            )
            with contextlib.suppress(Exception):
                await self._greenlets.run(contextvars.Context().run, end)

    async def call(self, kind: str, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if asyncio.get_running_loop() is not self._loop:
            await self._adopt()
        return await self._greenlets.run(getattr(self.store, name), *args, **kw)

    async def iterate(
        self, kind: str, name: str, page: int, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> AsyncIterator[Any]:
        await self._here()
        iterator = getattr(self.store, name)(*args, **kw)
        try:
            while True:
                chunk = await self._greenlets.run(_take, iterator, page)
                for item in chunk:
                    yield item
                if len(chunk) < page:
                    return
        finally:
            iterator.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        await self._here()
        prior = block_state(self.store)
        block: AbstractContextManager[None] = self.store.transaction()
        opened = _LoopBlock(asyncio.get_running_loop(), block)
        self._open.append(opened)
        try:
            try:
                await self._greenlets.run(block.__enter__)
            except BaseException:
                opened.ended = True
                raise
            opened.entered = True
            try:
                yield
            except BaseException as exc:
                if isinstance(exc, GeneratorExit) or opened.ended:
                    # Finalized by the garbage collector, its loop closed: nothing may be
                    # awaited here. The block is ended by the next call, from a live loop.
                    self._loop = None
                    raise
                opened.ended = True
                await self._end(block, exc, prior)
                raise
            if opened.ended:
                raise LoopClosedError(
                    "this transaction() block was rolled back: the event loop it was opened "
                    "on was closed while it was open"
                )
            opened.ended = True
            await self._end(block, None, prior)
        finally:
            if opened.ended:
                with contextlib.suppress(ValueError):
                    self._open.remove(opened)

    async def _end(
        self,
        block: AbstractContextManager[None],
        exc: BaseException | None,
        prior: BlockState,
    ) -> None:
        """End the block in a task of its own, seen through even when this task is cancelled
        again meanwhile; then this task's context is put back as it was before the block."""
        kind = None if exc is None else type(exc)
        ending = asyncio.ensure_future(self._greenlets.run(block.__exit__, kind, exc, None))
        try:
            await asyncio.shield(ending)
        finally:
            restore_block_state(self.store, prior)

    async def aclose(self) -> None:
        try:
            await self._here()
            await self._greenlets.run(self.store.close)
            await self.async_engine.dispose()
        finally:
            self._greenlets.close()


class _LoopBlock:
    """A block open on the loop: the loop, the Store's block, whether it was entered, and
    whether its end is under way (or done)."""

    __slots__ = ("block", "ended", "entered", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, block: AbstractContextManager[None]):
        self.loop = loop
        self.block = block
        self.entered = False
        self.ended = False
