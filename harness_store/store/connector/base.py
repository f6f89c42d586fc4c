"""`Connector`: the one holder of a Store's DBAPI connections, and its one way in.

Every Store call reaches the database through its connector: a read or a write unit (`unit`),
a block of calls (`transaction`), the pre-compiled hot paths (`run_driver`, `driver_read`,
`rows`), and maintenance that must run outside any transaction (`maintenance`, which refuses
inside an open block). One subclass per way of holding connections: `SQLiteConnector` keeps
one connection for the Store's life (threads take turns on it; concurrent checkpoints share
commits), `PooledConnector` borrows from the pool and keeps a few driver connections for the
hot paths (PostgreSQL). Driver errors leave as typed `StoreError`s, translated here from the
backend's error codes.

Inside `transaction()` every call of the same thread (or asyncio task: the open block is
context-local) joins the one open transaction; a write there runs in its own savepoint.
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, NoReturn

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.sql import ClauseElement

from ...dialects import Backend
from ...dialects.base import WRITE_DEADLINE
from ...dialects.sqlite import WRITE
from ...errors import StoreConnectionError, StoreError, TransactionOpenError
from ..driver import DriverStatement
from .kept import Awaited

Work = Sequence[tuple[DriverStatement, Any]]
"""Pre-compiled statements and their parameters, run in order."""

BlockState = tuple[Connection | None, bool]
"""What a context has open on a connector: the block's connection (None for none), and
whether it may write."""


class _Active:
    """The block this thread — or asyncio task — has open on this connector, if any.

    Context-local rather than thread-local: a new thread starts with an empty context (so
    each thread still has its own), and each asyncio task runs in its own copy, so the tasks
    of an `AsyncStore` that share the event loop's thread never join each other's block."""

    __slots__ = ("_var",)

    def __init__(self) -> None:
        self._var: ContextVar[BlockState] = ContextVar(
            "harness_store_active", default=(None, False)
        )

    @property
    def conn(self) -> Connection | None:
        return self._var.get()[0]

    @property
    def write(self) -> bool:
        return self._var.get()[1]

    def get(self) -> BlockState:
        return self._var.get()

    def set(self, conn: Connection | None, write: bool) -> None:
        """Open (`conn`) or end (None) this context's transaction."""
        self._var.set((conn, write))


class Connector(ABC):
    """A Store's connections and the operations on them (see the module)."""

    def __init__(
        self, engine: Engine, backend: Backend, url: URL, *, busy_timeout: float | None = None
    ) -> None:
        self.engine = engine
        self.backend = backend
        self.url = url
        self._active = _Active()
        self._lock = threading.RLock()
        self._queue = backend.write_queue(url, busy_timeout=busy_timeout)
        self._begin_write = backend.begin_write_sql()
        self._adapted = bool(engine.dialect.is_async)
        """Whether the pool's connections are SQLAlchemy's asyncio adapters (an `AsyncStore`
        on PostgreSQL): the hot paths then drive the asyncio driver's own cursors (`Awaited`)."""
        self.closed = False

    # --- the open block ------------------------------------------------------------------

    def in_block(self) -> bool:
        """Whether this thread (or task) has a `transaction()` block open."""
        return self._active.conn is not None

    def may_write(self) -> bool:
        """Whether a write now may run: outside any transaction, or inside a writable one."""
        return self._active.conn is None or self._active.write

    def block_state(self) -> BlockState:
        """This context's open block, to be put back by `restore_block_state` (an
        `AsyncStore` that ends a block in a task of its own)."""
        return self._active.get()

    def restore_block_state(self, state: BlockState) -> None:
        self._active.set(*state)

    # --- lifecycle -----------------------------------------------------------------------

    @abstractmethod
    def _borrow(self) -> AbstractContextManager[Connection]:
        """A SQLAlchemy connection for one operation or block."""

    @abstractmethod
    def _maintenance_driver(self) -> AbstractContextManager[Any]:
        """A driver connection with no transaction open, for `maintenance`."""

    @contextmanager
    def released(self) -> Iterator[None]:
        """The connections given back for the body (an upgrade opening the file itself),
        and taken again after it."""
        yield

    def forked(self) -> None:
        """In a child after `fork()`: start fresh locks and contexts (subclasses drop the
        parent's connections without closing them)."""
        self._lock = threading.RLock()
        self._active = _Active()
        self._queue.forked()

    def close(self) -> None:
        """Release every connection. Idempotent."""
        if self.closed:
            return
        with self._lock:
            self.closed = True
            self._close_connections()
            self._queue.close()
            self.engine.dispose()

    def _close_connections(self) -> None:  # noqa: B027 - nothing held by default
        """Close what this connector keeps beyond the pool."""

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError("this Store is closed")

    # --- units and blocks ----------------------------------------------------------------

    @contextmanager
    def unit(self, *, write: bool, driver: bool = False, alone: bool = False) -> Iterator[Any]:
        """The one way a Store call gets its transaction; every read and write goes through it.

        Inside this context's open `transaction()` block a write runs in its own savepoint, so
        a failed call is undone alone and the block goes on (on PostgreSQL an error would
        otherwise abort the whole transaction); a read joins the block as it is. Otherwise the
        call gets its own transaction (`BEGIN IMMEDIATE` for a SQLite write), committed when
        the body ends and rolled back when it raises.

        Yields a SQLAlchemy `Connection`, or with `driver=True` the driver object to run
        pre-compiled statements on (the hot paths, with no SQLAlchemy machinery per
        statement). `alone=True` promises one statement: on a pooled connection it then runs
        in autocommit, atomic by itself, saving the BEGIN and COMMIT round trips. Driver
        errors leave here as typed `StoreError`s.
        """
        self._check_open()
        try:
            active = self._active.conn
            if active is None:
                with self._own_unit(write=write, driver=driver, alone=alone) as unit:
                    yield unit
                return
            if write and not self._active.write:
                raise StoreError("cannot write inside a read-only transaction")
            joined = self.driver_cursor(active.connection.dbapi_connection) if driver else active
            if not write:
                yield joined
                return
            if driver:  # the hot path's savepoint, on its own cursor: no SQLAlchemy per call
                cursor: Any = joined
                cursor.execute("SAVEPOINT hs_unit")
                try:
                    yield cursor
                except BaseException:
                    cursor.execute("ROLLBACK TO hs_unit")
                    cursor.execute("RELEASE hs_unit")
                    raise
                cursor.execute("RELEASE hs_unit")
                return
            with active.begin_nested():
                yield joined
        except StoreError:
            raise
        except Exception as exc:
            self.raise_typed(exc)

    @abstractmethod
    def _own_unit(self, *, write: bool, driver: bool, alone: bool) -> AbstractContextManager[Any]:
        """A unit outside any block: its own transaction (see `unit`)."""

    @contextmanager
    def _engine_unit(self, conn: Connection, write: bool) -> Iterator[Connection]:
        """A SQLAlchemy transaction of its own on `conn`, a write in the writers' turn."""
        conn.info[WRITE] = write
        with self._queue.turn() if write else nullcontext() as deadline:
            conn.info[WRITE_DEADLINE] = deadline
            with conn.begin():
                self._active.set(conn, write)
                try:
                    yield conn
                finally:
                    self._active.set(None, False)

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """One read transaction in which every statement sees the same instant (on PostgreSQL
        `REPEATABLE READ`), for a reader of a whole store: sync's and copy's sources. A still
        file read (`immutable=1`) sees no writer; the reader asks `backend.still_read_outdated`
        before it trusts what it read, and reads again in a new snapshot if a writer opened the
        file meanwhile (the connection is then replaced). Refused inside an open block.

        Errors raised in the body leave as they are, untranslated: the reader of a source
        writes its destination in the body, whose errors are the destination's."""
        self._check_open()
        if self._active.conn is not None:
            raise TransactionOpenError(
                "a snapshot cannot join a transaction() block (nothing was read)"
            )
        with self._borrow() as conn, self._engine_unit(conn, False):
            first = self.backend.snapshot_sql()
            if first is not None:
                conn.exec_driver_sql(first)
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A block of Store calls: all of them, or none (see `Store.transaction`). Nested, a
        savepoint; a block the server aborted raises instead of ending quietly."""
        active = self._active.conn
        if active is not None:
            if not self._active.write:
                raise StoreError("cannot write inside a read-only transaction")
            with self.translated(), active.begin_nested():
                yield
            return
        with self.translated(), self._borrow() as conn, self._queue.turn() as deadline:
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
            if self.backend.transaction_aborted(conn.connection.dbapi_connection):
                outer.rollback()
                raise StoreError(
                    "the transaction was aborted by the server after an error inside the "
                    "block; nothing of it was committed"
                )
            outer.commit()

    @contextmanager
    def maintenance(self) -> Iterator[Any]:
        """A driver connection outside any transaction, in the writers' turn, for work that
        cannot run inside one (`VACUUM`). Refused with `TransactionOpenError` inside an open
        block, before anything is done: it would otherwise have to commit the block."""
        self._check_open()
        if self._active.conn is not None:
            raise TransactionOpenError(
                "this call cannot run inside a transaction() block (nothing was done); "
                "call it after the block ends"
            )
        with self.translated(), self._maintenance_driver() as driver:
            yield driver

    # --- the pre-compiled paths ----------------------------------------------------------

    def run_driver(self, work: Work, *, many: bool = False) -> None:
        """Run pre-compiled statements in one write transaction on the driver connection (the
        hot path of checkpoints); `many` runs each with a sequence of parameter sets (a bulk
        load)."""
        with self.unit(write=True, driver=True, alone=len(work) == 1 and not many) as unit:
            run = unit.executemany if many else unit.execute
            for statement, params in work:
                run(statement.sql, params)

    def driver_read(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
        """One pre-compiled SELECT on the driver connection, as its own snapshot (the hot read
        path of tree aggregates)."""
        with self.unit(write=False, driver=True, alone=True) as unit:
            return unit.execute(statement.sql, statement.params(values)).fetchall()  # type: ignore[no-any-return]

    def rows(self, conn: Connection, statement: ClauseElement) -> list[Any]:
        """The rows of `statement` read on `conn`'s driver connection, inside the unit `conn`
        belongs to, as plain tuples: for reads of many rows, where building a SQLAlchemy
        `Row` for each costs more than reading them. Parameters are bound, never inlined."""
        sql, params = _bound(conn, statement)
        cursor = self.driver_cursor(conn.connection.dbapi_connection)
        try:
            return list(cursor.execute(sql, params).fetchall())
        finally:
            cursor.close()

    def stream(
        self, conn: Connection, statement: ClauseElement, batch_rows: int
    ) -> Iterator[list[Any]]:
        """The rows of `statement` read on `conn`'s driver connection as they are consumed, in
        lists of at most `batch_rows` plain tuples, inside the unit `conn` belongs to: `rows`
        for reads too large to hold at once (an Arrow export). One batch is held at a time:
        SQLite steps its cursor, PostgreSQL reads through a server-side cursor."""
        sql, params = _bound(conn, statement)
        cursor = self._streaming_cursor(conn.connection.dbapi_connection)
        try:
            cursor.execute(sql, params)
            while batch := cursor.fetchmany(batch_rows):
                yield batch
        finally:
            cursor.close()

    def _streaming_cursor(self, dbapi_connection: Any) -> Any:
        """The cursor `stream` reads with: a plain one, which fetches as it is stepped."""
        return self.driver_cursor(dbapi_connection)

    def driver_cursor(self, dbapi_connection: Any) -> Any:
        """A cursor on a driver connection for the hot paths; behind an asyncio adapter, a
        cursor of the asyncio driver's own connection, awaited in the call's greenlet."""
        if self._adapted:
            return Awaited(dbapi_connection.driver_connection.cursor())
        return dbapi_connection.cursor()

    # --- errors --------------------------------------------------------------------------

    @contextmanager
    def translated(self) -> Iterator[None]:
        """Turn driver errors into typed `StoreError`s (locked, read-only, …)."""
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            self.raise_typed(exc)

    def raise_typed(self, exc: Exception, *, may_have_committed: bool = False) -> NoReturn:
        """Raise `exc` as its typed `StoreError`, or unchanged when it is no database error.

        `may_have_committed` is true only for a statement that was its own commit: a lost
        connection then cannot say whether the server kept it."""
        if isinstance(exc, StoreError):
            raise exc
        typed = self.typed(exc)
        if typed is None:
            raise exc
        if isinstance(typed, StoreConnectionError):
            typed.may_have_committed = may_have_committed
        raise typed from exc

    def typed(self, exc: Exception) -> StoreError | None:
        """The `StoreError` for a database error, or None for an error that is not one."""
        orig: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc
        typed = self.backend.translate_error(orig)
        if typed is not None:
            return typed
        database_error = isinstance(exc, SQLAlchemyError | sqlite3.Error | UnicodeEncodeError)
        if database_error or type(exc).__module__.startswith("psycopg"):
            return StoreError(f"{type(orig).__name__}: {orig}")
        return None

    def error_of(self, exc: Exception, *, interrupted: Exception | None = None) -> BaseException:
        """A caller's own error for `exc` raised while its write was committed by any thread
        (a new object per caller): typed when it is a database error; `interrupted` when given
        and it is none (the call's own non-database error, raised as itself); else a
        `StoreError` saying the write was not committed."""
        if isinstance(exc, StoreError):
            return copy.copy(exc)
        typed = self.typed(exc)
        if typed is not None:
            typed.__cause__ = exc
            return typed
        if interrupted is not None:
            return interrupted
        return StoreError(f"not committed: {type(exc).__name__}: {exc}")


def _bound(conn: Connection, statement: ClauseElement) -> tuple[str, Any]:
    """`statement` compiled for `conn`'s dialect, and its parameters, bound (never inlined;
    an `IN` list's values each a parameter of its own)."""
    compiled: Any = statement.compile(
        dialect=conn.dialect, compile_kwargs={"render_postcompile": True}
    )
    if compiled.positional:
        return str(compiled), [compiled.params[name] for name in compiled.positiontup or ()]
    return str(compiled), compiled.params
