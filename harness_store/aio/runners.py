"""How an `AsyncStore` runs the sync Store's code without blocking the event loop.

`ThreadRunner` (SQLite, whose driver has no asyncio API): writes run on a few threads
(`lanes`) calling the one Store, so concurrent tasks' checkpoints meet in group commit
(`store.connector.group`) under `BEGIN IMMEDIATE` and the busy timeout as from threads;
reads run on a second set over a read-only twin of the file, so they never queue behind a
write. Inside
`transaction()` every call of the task runs on the one thread that holds the transaction.

`GreenletRunner` (PostgreSQL): the Store runs over SQLAlchemy's asyncio engine, each call in
`greenlet_spawn`, so its I/O is psycopg's async I/O on the event loop — no thread per call.

A cancelled call is all or nothing: on a thread it runs to its end (or never starts); on the
loop the cancellation unwinds the call's transaction, which the database rolls back whole.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, asynccontextmanager
from itertools import islice
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .lanes import Lanes
from .methods import READ

if TYPE_CHECKING:
    from ..store import Store
    from ..store.connector import BlockState

WRITE_THREADS = 8
"""Threads calling the Store's writes: enough for group commit to batch 8 concurrent tasks."""
READ_THREADS = 4
"""Threads reading through the read-only twin."""


def _take(iterator: Iterator[Any], count: int) -> list[Any]:
    return list(islice(iterator, count))


class ThreadRunner:
    """Runs Store calls on threads (see the module)."""

    def __init__(self, store: Store, reader: Store | None) -> None:
        self.store = store
        self.reader = reader
        self._writes = Lanes(WRITE_THREADS, "hs-async-write")
        self._reads = Lanes(READ_THREADS, "hs-async-read") if reader is not None else self._writes
        self._bound: contextvars.ContextVar[_Bound | None] = contextvars.ContextVar(
            "harness_store_bound", default=None
        )
        self.engine = store.engine
        self.write_engine = store.write_engine
        self._closed = False

    def _place(self, kind: str) -> tuple[Callable[..., Any], Store]:
        """Where a call runs: the transaction's thread in a block, else by kind."""
        if self._closed:
            raise StoreError("this Store is closed")
        bound = self._bound.get()
        if bound is not None:
            return bound.run, self.store
        if kind == READ and self.reader is not None:
            return self._reads.run, self.reader
        return self._writes.run, self.store

    async def call(self, kind: str, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        hop, target = self._place(kind)
        return await hop(functools.partial(getattr(target, name), *args, **kw))

    async def iterate(
        self, kind: str, name: str, page: int, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> AsyncIterator[Any]:
        hop, target = self._place(kind)
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
        bound = self._bound.get()
        if bound is not None:  # nested: a savepoint, on the same thread
            block = self.store.transaction()
            began = False

            def begin() -> None:
                nonlocal began
                block.__enter__()
                began = True

            def end_begun() -> None:
                if began:
                    block.__exit__(asyncio.CancelledError, asyncio.CancelledError(), None)

            try:
                await bound.run(begin)
            except BaseException:
                # Cancelled while the savepoint was being opened: once it is, close it on the
                # block's thread, before the outer block ends (the thread runs in order); left
                # open, it would be ended by the garbage collector on whatever thread, on the
                # connection another block is using by then.
                bound.submit(end_begun)
                raise
            try:
                yield
            except BaseException as exc:
                await bound.finish(functools.partial(block.__exit__, type(exc), exc, None))
                raise
            await bound.finish(functools.partial(block.__exit__, None, None, None))
            return
        bound = _Bound()
        block = self.store.transaction()
        entered = False

        def enter() -> None:
            nonlocal entered
            block.__enter__()
            entered = True

        def abandon() -> None:
            if entered:
                block.__exit__(asyncio.CancelledError, asyncio.CancelledError(), None)

        try:
            await bound.run(enter)
        except BaseException:
            # Cancelled while waiting for the write lock: once `enter` runs, end the block.
            bound.submit(abandon)
            bound.shutdown()
            raise
        token = self._bound.set(bound)
        try:
            yield
        except BaseException as exc:
            self._bound.reset(token)
            try:
                await bound.finish(functools.partial(block.__exit__, type(exc), exc, None))
            finally:
                bound.shutdown()
            raise
        self._bound.reset(token)
        try:
            await bound.finish(functools.partial(block.__exit__, None, None, None))
        finally:
            bound.shutdown()

    async def aclose(self) -> None:
        self._closed = True

        def close() -> None:
            self._writes.close()
            self._reads.close()
            self.store.close()
            if self.reader is not None:
                self.reader.close()

        await asyncio.to_thread(close)


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
    """The one thread of an open transaction block, and the context its calls run in (where
    the Store keeps the block's connection)."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="hs-async-tx")
        self._context = contextvars.Context()

    def submit(self, work: Callable[[], Any]) -> Any:
        return self._thread.submit(self._context.run, work)

    async def run(self, work: Callable[[], Any]) -> Any:
        """`work` on the block's thread; cancelled before it starts, it never runs."""
        return await asyncio.wrap_future(self.submit(work))

    async def finish(self, work: Callable[[], Any]) -> Any:
        """`work` (the end of a block) on the block's thread, run even when the caller is
        cancelled while waiting for it: a block that began must end, or it would keep the
        write lock."""
        return await asyncio.shield(asyncio.wrap_future(self.submit(work)))

    def shutdown(self) -> None:
        self._thread.shutdown(wait=False)


class GreenletRunner:
    """Runs Store calls on the event loop over SQLAlchemy's asyncio engine (see the module)."""

    def __init__(self, store: Store, engine: Any) -> None:
        self.store = store
        self.async_engine = engine
        self.engine = engine
        self.write_engine = engine

    async def call(self, kind: str, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        from sqlalchemy.util import greenlet_spawn

        return await greenlet_spawn(getattr(self.store, name), *args, **kw)

    async def iterate(
        self, kind: str, name: str, page: int, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> AsyncIterator[Any]:
        from sqlalchemy.util import greenlet_spawn

        iterator = getattr(self.store, name)(*args, **kw)
        try:
            while True:
                chunk = await greenlet_spawn(_take, iterator, page)
                for item in chunk:
                    yield item
                if len(chunk) < page:
                    return
        finally:
            iterator.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        from sqlalchemy.util import greenlet_spawn

        prior = self.store._connector.block_state()
        block: AbstractContextManager[None] = self.store.transaction()
        await greenlet_spawn(block.__enter__)
        try:
            yield
        except BaseException as exc:
            await self._end(block, exc, prior)
            raise
        await self._end(block, None, prior)

    async def _end(
        self,
        block: AbstractContextManager[None],
        exc: BaseException | None,
        prior: BlockState,
    ) -> None:
        """End the block in a task of its own, seen through even when this task is cancelled
        again meanwhile; then this task's context is put back as it was before the block."""
        from sqlalchemy.util import greenlet_spawn

        kind = None if exc is None else type(exc)
        ending = asyncio.ensure_future(greenlet_spawn(block.__exit__, kind, exc, None))
        try:
            await asyncio.shield(ending)
        finally:
            self.store._connector.restore_block_state(prior)

    async def aclose(self) -> None:
        from sqlalchemy.util import greenlet_spawn

        await greenlet_spawn(self.store.close)
        await self.async_engine.dispose()
