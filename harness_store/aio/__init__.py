"""`AsyncStore`: the whole `Store` for asyncio programs.

Every public Store method is a coroutine of the same name and signature here (generators are
async iterators), written out in `generated` by `scripts/generate_async.py`, and run on a
thread or on the loop as the method's own mark says (`store.marks`, read by `methods`). Open
with `await AsyncStore.open(target, ...)` (Store.open's arguments) and use as `async with`;
group calls with `async with store.transaction():`.

On PostgreSQL the calls run natively on the event loop (psycopg's async driver: its
`AsyncConnection` awaited straight from each call's greenlet on the hot paths, under
SQLAlchemy's asyncio engine for the rest); on SQLite on at most four named threads, writes
batched into shared commits and reads on a read-only twin of the file (see `thread_runner`). Errors
are the Store's typed errors.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Self

from sqlalchemy.engine import URL

from ..dialects import backend_named
from ..engine import make_async_engine, read_only_url, to_url
from ..errors import StoreConnectionError, StoreError
from ..formats import i64
from ..records import RunEvent
from ..store import Store
from ..store.stream import FOLLOW_BATCH, follow_limit
from ..targets import Target, TargetLike
from .generated import StoreMethods
from .lanes import Lanes
from .loop_runner import GreenletRunner
from .methods import WRITE
from .thread_runner import THREAD, ThreadRunner

__all__ = ["AsyncLease", "AsyncStore"]

STOP_POLL = 0.05
"""How often `follow` looks at a `stop` event while it waits between polls."""


class AsyncStore(StoreMethods):
    """A run store for asyncio code: `Store`'s methods as coroutines (see the module)."""

    def __init__(self, store: Store, runner: ThreadRunner | GreenletRunner) -> None:
        self._store = store
        self._runner = runner
        self._closed = False

    @classmethod
    async def open(
        cls,
        target: TargetLike,
        *,
        upgrade: bool = True,
        backup: bool = True,
        synchronous: str | None = None,
        read_only: bool = False,
        busy_timeout: float | None = None,
        schema: str | None = None,
    ) -> Self:
        """`Store.open` for asyncio: the same arguments, checks, upgrade and errors (opening
        itself runs on a thread)."""
        if schema is not None:
            target = Target.parse(target, schema=schema)  # refused before any thread starts
        opener = functools.partial(
            Store.open,
            target,
            upgrade=upgrade,
            backup=backup,
            synchronous=synchronous,
            read_only=read_only,
            busy_timeout=busy_timeout,
        )
        if not _speaks_asyncio(target):
            runner = await ThreadRunner.open(opener, read_only=read_only)
            return cls(runner.store, runner)
        # Checked (and upgraded) by a sync open on a thread of its own, ended once it is done;
        # the calls then run over an asyncio engine, on the loop.
        opening = Lanes(1, f"{THREAD}-open")
        try:
            opened: Store = await opening.run(opener)
            url, report = opened.url, opened.upgrade_report
            await opening.run(opened.close)
        finally:
            await opening.aclose()
        speaks = read_only_url(url) if read_only else url
        engine = make_async_engine(speaks, synchronous=synchronous, busy_timeout=busy_timeout)
        store = Store(
            speaks,
            synchronous=synchronous,
            busy_timeout=busy_timeout,
            engine=engine.sync_engine,
            url=url,
            read_only=read_only,
            upgrade_report=report,
        )
        return cls(store, GreenletRunner(store, engine))

    @classmethod
    async def memory(cls, *, synchronous: str | None = None) -> Self:
        """`Store.memory` for asyncio: a throwaway in-memory SQLite store."""
        runner = await ThreadRunner.open(
            functools.partial(Store.memory, synchronous=synchronous), read_only=True
        )
        return cls(runner.store, runner)

    @property
    def store(self) -> Store:
        """The sync Store underneath (on PostgreSQL its engine is the asyncio engine's
        `sync_engine`: call it only through this facade)."""
        return self._store

    @property
    def engine(self) -> Any:
        """The engine to read the store through with your own sessions: on PostgreSQL the
        `AsyncEngine` the calls run on (for `AsyncSession`), on SQLite the Store's `engine`."""
        return self._runner.engine

    @property
    def write_engine(self) -> Any:
        """`Store.write_engine`'s twin: on PostgreSQL the `AsyncEngine` (its transactions
        need no special begin), on SQLite the Store's `write_engine`."""
        return self._runner.write_engine

    @property
    def url(self) -> URL:
        """The store's URL, as `Store.url`."""
        return self._store.url

    async def close(self) -> None:
        """Release the store's threads and connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._runner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """`Store.transaction` as `async with`: the task's calls inside the block are one
        atomic transaction (a nested block is a savepoint). Each task has its own block;
        other tasks' calls do not join it."""
        return self._runner.transaction()

    async def follow(
        self,
        cursor: int | None = None,
        *,
        run_id: int | None = None,
        interval: float = 0.5,
        batch: int = FOLLOW_BATCH,
        stop: threading.Event | None = None,
    ) -> AsyncIterator[tuple[int, RunEvent]]:
        """`Store.follow` as an async iterator: the same polls (one lost with its connection
        made once more), waiting with `asyncio.sleep` (no thread is held between polls)."""
        limit = follow_limit(interval, batch)
        position = await self.event_cursor() if cursor is None else i64(cursor, "cursor")
        while stop is None or not stop.is_set():
            try:
                rows = await self.events_after(position, limit, run_id)
            except StoreConnectionError:
                rows = await self.events_after(position, limit, run_id)  # a read: safe to repeat
            for row in rows:
                yield row
                position = row[0]
            if len(rows) == limit:
                continue
            if stop is None:
                await asyncio.sleep(interval)
                continue
            waited = 0.0
            while waited < interval and not stop.is_set():
                step = min(STOP_POLL, interval - waited)
                await asyncio.sleep(step)
                waited += step

    async def acquire_lease(self, run_id: int, ttl_secs: int) -> AsyncLease:
        """`Store.acquire_lease`: the lease comes back as an `AsyncLease` (`await
        lease.renew()`, `async with lease:`)."""
        lease = await self._runner.call(WRITE, "acquire_lease", (run_id, ttl_secs), {})
        return AsyncLease(self, lease.run_id, lease.generation)

    async def _call(self, kind: str, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        return await self._runner.call(kind, name, args, kw)

    def _iterate(
        self, kind: str, name: str, page: int, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> AsyncIterator[Any]:
        return self._runner.iterate(kind, name, page, args, kw)

    def _local(self, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        return getattr(self._store, name)(*args, **kw)

    def _attribute(self, name: str) -> Any:
        return getattr(self._store, name)


def _speaks_asyncio(target: TargetLike) -> bool:
    """Whether the target's backend has an asyncio driver (PostgreSQL). An unknown backend is
    left to `Store.open`, which refuses it with its own error."""
    try:
        return backend_named(to_url(target).get_backend_name()).native_async
    except StoreError:
        return False


class AsyncLease:
    """`Lease` for an `AsyncStore`: a run lease this handle holds. Release it with `await
    release()` or by leaving an `async with` block; an unreleased lease lapses after its ttl."""

    def __init__(self, store: AsyncStore, run_id: int, generation: int) -> None:
        self._store = store
        self.run_id = run_id
        self.generation = generation
        self.released = False

    async def renew(self) -> None:
        """Extend the lease at its generation; `LeaseConflictError` once taken over."""
        await self._store.renew_lease(self.run_id, self.generation)

    async def release(self) -> None:
        """Give the run up now (no row is left: anyone may acquire it)."""
        self.released = True
        await self._store.release_lease(self.run_id, self.generation)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self.released:
            await self.release()

    def __repr__(self) -> str:
        return (
            f"AsyncLease(run_id={self.run_id}, generation={self.generation}, "
            f"owner={self._store.store.owner()!r}, released={self.released})"
        )


def _check_mirrored() -> None:
    """Give the hand-written coroutines the Store methods' signatures. (That every public
    Store method has its coroutine is `tests/aio/test_async_generated.py`'s check: raising
    here would stop `scripts/generate_async.py` itself from importing the package.)"""
    for name in ("follow", "acquire_lease"):
        method = getattr(AsyncStore, name)
        returns = "AsyncLease" if name == "acquire_lease" else None
        signature = inspect.signature(getattr(Store, name))
        if returns is not None:
            signature = signature.replace(return_annotation=returns)
        method.__signature__ = signature


_check_mirrored()
