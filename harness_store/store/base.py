"""The Store's connection and transaction handling, shared by every concern.

A Store reads through SQLAlchemy Core on a `Connection` and writes its hot paths (steps and
checkpoints) as pre-compiled statements straight on the driver connection, inside the same
kind of transaction (see `driver`). On SQLite a Store keeps one connection for its life, as
upstream keeps one `rusqlite::Connection`, and threads take turns on it under a lock (their
concurrent checkpoints share commits: `group`); write transactions begin with `BEGIN
IMMEDIATE`, so a second process waits on the busy timeout instead of failing. On PostgreSQL
the hot paths run on a few kept connections (`held`) and other operations borrow a pooled
one. Inside `Store.transaction()` every call of the same thread (or asyncio task: the open
transaction is context-local) joins the one open transaction.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, insert, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import configure_mappers
from sqlalchemy.sql import ClauseElement

from .. import models as m
from ..dialects import Backend
from ..dialects.base import WRITE_DEADLINE
from ..dialects.sqlite import WRITE
from ..errors import RunNotFoundError, StoreError
from .driver import DriverPaths
from .driver import DriverStatement as DriverStatement
from .group import GroupCommit
from .held import Chained, HeldConnections

T = TypeVar("T")


class _Active:
    """The transaction this thread — or asyncio task — has open on this Store, if any.

    Context-local rather than thread-local: a new thread starts with an empty context (so
    each thread still has its own), and each asyncio task runs in its own copy, so the tasks
    of an `AsyncStore` that share the event loop's thread never join each other's block."""

    __slots__ = ("_var",)

    def __init__(self) -> None:
        self._var: ContextVar[tuple[Connection | None, bool]] = ContextVar(
            "harness_store_active", default=(None, False)
        )

    @property
    def conn(self) -> Connection | None:
        return self._var.get()[0]

    @property
    def write(self) -> bool:
        return self._var.get()[1]

    def set(self, conn: Connection | None, write: bool) -> None:
        """Open (`conn`) or end (None) this context's transaction."""
        self._var.set((conn, write))


class StoreBase(DriverPaths):
    """Connection handling; the concerns (runs, events, trees, memory) build on it."""

    def __init__(
        self, engine: Engine, backend: Backend, url: URL, *, busy_timeout: float | None = None
    ) -> None:
        self._engine = engine
        self._backend = backend
        self.url = url
        self._active = _Active()
        self._lock = threading.RLock()
        self._held: Connection | None = None
        self._raw: Any = None
        """The held connection's driver connection (SQLite), for the hot path."""
        self._cursor: Any = None
        """A cursor on `_raw`, kept for the hot path's statements."""
        self._group = GroupCommit(self._commit_calls)
        self._kept = self._keep()
        self._begin_write = backend.begin_write_sql()
        self._queue = backend.write_queue(url, busy_timeout=busy_timeout)
        self._columns_seen: dict[str, frozenset[str]] = {}
        self._adapted = bool(engine.dialect.is_async)
        """Whether the driver connections are SQLAlchemy's asyncio adapters (an `AsyncStore`
        on PostgreSQL), whose cursors need `Chained` for the hot paths."""
        # Set the models' mappers up now (once a process, ~0.1 s for 37 tables), not inside
        # the first write that names a model, whose latency a caller does not expect.
        configure_mappers()
        if backend.one_connection:
            self._hold()
        self._closed = False
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def _forked(self) -> None:
        """In a child after `fork()`: the parent's connections are the parent's. Drop them —
        never close them, which would end the parent's sessions or reset its transactions —
        and take fresh ones (SQLAlchemy's documented pattern, `dispose(close=False)`)."""
        self._lock = threading.RLock()
        self._active = _Active()
        self._group = GroupCommit(self._commit_calls)
        self._queue.forked()
        if self._kept is not None:
            _INHERITED.extend(self._kept.inherited())
            self._kept = self._keep()
        if self._closed or self._backend.shares_memory(self._engine):
            return  # an in-memory database exists only on its one connection: keep it
        if self._held is not None:
            _INHERITED.append(self._held)  # kept referenced, so it is never finalized here
            self._held = None
            self._raw = None
            self._cursor = None
        self._engine.dispose(close=False)
        if self._backend.one_connection:
            self._hold()

    def _keep(self) -> HeldConnections | None:
        """The set of kept driver connections of a pooled backend (see `held`), if it uses one."""
        cap = self._backend.held_connections
        if not cap:
            return None
        on_loop = bool(self._engine.dialect.is_async)  # an AsyncStore's, on the event loop
        return HeldConnections(
            self._engine,
            self._backend.connection_alive,
            cap,
            on_loop=on_loop,
            ping=self._engine.dialect.do_ping if on_loop else None,
            ping_after=self._backend.loop_ping_after,
        )

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine behind this Store, for reading through ORM sessions over the
        models. On SQLite its transactions begin deferred: a session that reads and then
        writes fails at once if another process wrote in between — write through
        `write_engine`."""
        return self._engine

    @property
    def write_engine(self) -> Engine:
        """The Store's engine with write transactions: on SQLite each transaction begins with
        `BEGIN IMMEDIATE`, so an ORM session that reads then writes waits for other writers
        (up to the busy timeout) instead of failing on a stale read. Same as `engine` on
        PostgreSQL. Bind sessions that write to it: `Session(store.write_engine)`."""
        return self._engine.execution_options(**{WRITE: True})

    @property
    def backend(self) -> Backend:
        """The backend ("sqlite" or "postgresql") this Store speaks through."""
        return self._backend

    # --- lifecycle -----------------------------------------------------------------------

    def _hold(self) -> None:
        """Take the connection this Store keeps for its life (SQLite)."""
        self._held = self._engine.connect()
        self._raw = self._held.connection.dbapi_connection
        self._cursor = self._raw.cursor()

    def _release(self) -> None:
        """Give the held connection back (before an upgrade, and on close)."""
        if self._held is not None:
            self._held.close()
        self._held = None
        self._raw = None
        self._cursor = None

    def close(self) -> None:
        """Release the Store's connections. Idempotent."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            self._release()
            self._queue.close()
            if self._kept is not None:
                self._kept.close()
            self._engine.dispose()

    def __enter__(self) -> StoreBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transactions --------------------------------------------------------------------

    @contextmanager
    def _borrow(self) -> Iterator[Connection]:
        """A connection for one operation: the held one under the lock, or one from the pool."""
        if self._closed:
            raise StoreError("this Store is closed")
        if self._held is not None:
            with self._lock:
                if self._held is None:
                    raise StoreError("this Store is closed")
                self._queue.settle(self._raw)
                yield self._held
        else:
            with self._engine.connect() as conn:
                yield conn

    @contextmanager
    def _unit(self, *, write: bool, driver: bool = False, alone: bool = False) -> Iterator[Any]:
        """The one way a Store call gets its transaction; every read and write goes through it.

        Inside this thread's open `transaction()` block a write runs in its own savepoint, so
        a failed call is undone alone and the block goes on (on PostgreSQL an error would
        otherwise abort the whole transaction); a read joins the block as it is. Otherwise the
        call gets its own transaction (`BEGIN IMMEDIATE` for a SQLite write), committed when
        the body ends and rolled back when it raises.

        Yields a SQLAlchemy `Connection`, or with `driver=True` the driver object to run
        pre-compiled statements on (the hot paths, with no SQLAlchemy machinery per
        statement). `alone=True` promises one statement: on a pooled connection it then runs
        in autocommit, atomic by itself, saving the BEGIN and COMMIT round trips. Driver
        errors leave here as typed `StoreError`s, translated in one place.
        """
        if self._closed:
            raise StoreError("this Store is closed")
        committing = False
        try:
            active = self._active.conn
            if active is not None:
                if write and not self._active.write:
                    raise StoreError("cannot write inside a read-only transaction")
                unit = self._driver_cursor(active.connection.dbapi_connection) if driver else active
                if not write:
                    yield unit
                    return
                with active.begin_nested():
                    yield unit
                return
            if driver and self._raw is not None:
                with self._lock:
                    raw = self._raw
                    if raw is None:
                        raise StoreError("this Store is closed")
                    if not write:
                        self._queue.settle(raw)
                        yield raw  # no transaction open: one statement is its own snapshot
                        return
                    self._queue.begin(self._cursor)
                    try:
                        yield raw
                    except BaseException:
                        raw.rollback()
                        raise
                    finally:
                        self._queue.end()
                    raw.commit()
                return
            with self._borrow() as conn:
                if driver:
                    if alone:
                        committing = write
                        with _autocommitted(conn) as pooled:
                            yield self._driver_cursor(pooled)
                        return
                    pooled = conn.connection.dbapi_connection
                    assert pooled is not None
                    cursor = self._driver_cursor(pooled)
                    try:
                        if self._begin_write is not None:
                            cursor.execute(self._begin_write)
                        yield cursor
                    except BaseException:
                        pooled.rollback()
                        raise
                    pooled.commit()
                    return
                conn.info[WRITE] = write
                with self._queue.turn() if write else nullcontext() as deadline:
                    conn.info[WRITE_DEADLINE] = deadline
                    with conn.begin():
                        self._active.set(conn, write)
                        try:
                            yield conn
                        finally:
                            self._active.set(None, False)
        except StoreError:
            raise
        except Exception as exc:
            self._raise_typed(exc, may_have_committed=committing)

    def _driver_cursor(self, dbapi_connection: Any) -> Any:
        """A cursor on a driver connection for the hot paths; an asyncio adapter's is wrapped
        so that `execute(...).fetchall()` chains as on a sync driver's."""
        cursor = dbapi_connection.cursor()
        return Chained(cursor) if self._adapted else cursor

    def _tx(self, *, write: bool) -> Any:
        """A SQLAlchemy connection inside the call's transaction (see `_unit`)."""
        return self._unit(write=write)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several Store writes into one atomic transaction: all of them, or none.

        Each Store call inside the block is atomic on its own: one that fails leaves nothing
        of itself, and when the caller catches its error the other calls of the block are
        still committed at the end. An exception leaving the block rolls the whole block
        back. A nested `transaction()` is a savepoint: all of its calls, or none of them, and
        the outer block goes on. A transaction that cannot commit (its connection was lost,
        the server aborted it) raises instead of ending quietly.

        On SQLite the write lock is taken when the block starts. Store calls made inside the
        block by the same thread join it; other threads wait for it to finish.
        """
        active = self._active.conn
        if active is not None:
            if not self._active.write:
                raise StoreError("cannot write inside a read-only transaction")
            with self._translated(), active.begin_nested():
                yield
            return
        with self._translated(), self._borrow() as conn, self._queue.turn() as deadline:
            conn.info[WRITE] = True
            conn.info[WRITE_DEADLINE] = deadline
            outer = conn.begin()
            self._active.set(conn, True)
            try:
                yield
            except BaseException:
                self._active.set(None, False)
                outer.rollback()
                raise
            self._active.set(None, False)
            if self._backend.transaction_aborted(conn.connection.dbapi_connection):
                outer.rollback()
                raise StoreError(
                    "the transaction was aborted by the server after an error inside the "
                    "block; nothing of it was committed"
                )
            outer.commit()

    def _write(self) -> Any:
        return self._tx(write=True)

    def _read(self) -> Any:
        return self._tx(write=False)

    def _run_column(self, run_id: int, column: Any, *, missing_ok: bool) -> Any:
        statement = select(column).where(m.Run.id == run_id)
        with self._read() as conn:
            row = conn.execute(statement).first()
        if row is None:
            if missing_ok:
                return None
            raise RunNotFoundError(f"no run with id {run_id} in the store")
        return row[0]

    def _has_columns(self, table: str, *columns: str) -> bool:
        """Whether the store's `table` has every one of `columns`. A read-only Store may read a
        store of any release from 0.13 on, which lacks later columns; the answer is cached."""
        known = self._columns_seen.get(table)
        if known is None:
            with self._read() as conn:
                known = frozenset(c["name"] for c in inspect(conn).get_columns(table))
            self._columns_seen[table] = known
        return known.issuperset(columns)

    def _scalar(self, statement: ClauseElement, params: Mapping[str, Any] | None = None) -> Any:
        with self._read() as conn:
            return conn.execute(statement, params or {}).scalar()

    def _rows(
        self,
        statement: ClauseElement,
        make: Callable[..., T],
        params: Mapping[str, Any] | None = None,
    ) -> list[T]:
        with self._read() as conn:
            return [make(*row) for row in conn.execute(statement, params or {})]

    def _append(self, model: type[m.Base], **values: object) -> None:
        """Append one row to an ordered log table, atomically."""
        with self._write() as conn:
            conn.execute(insert(model).values(**values))


_INHERITED: list[Any] = []
"""Connections a forked child inherited and dropped: referenced for the child's life so that
garbage collection never closes (or rolls back) what is still the parent's connection."""


def _after_fork(ref: weakref.ref[StoreBase]) -> None:
    store = ref()
    if store is not None:
        store._forked()


@contextmanager
def _autocommitted(conn: Connection) -> Iterator[Any]:
    """A borrowed connection's driver connection in autocommit, for one statement that is its
    own transaction. Restored afterwards; a connection that cannot be restored (lost, or still
    busy after an interrupt) is discarded, so no later borrower gets it in autocommit and the
    statement's own error is the one raised."""
    pooled: Any = conn.connection.dbapi_connection
    pooled.autocommit = True
    try:
        yield pooled
    finally:
        try:
            pooled.autocommit = False
        except Exception:
            conn.invalidate()
