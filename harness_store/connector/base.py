"""`Connector`: the one holder of a Store's DBAPI connections, and the package's one way in.

Every connection and transaction of the package is a connector's, so the writers' queue covers
every SQLite write. Its operations, by name:

- `read()`: one read transaction (inside an open block: the block, as it is);
- `write()`: one write transaction in the writers' turn (inside an open block: a savepoint);
- `load(commit=, keep_orphans=)`: the write transaction of a bulk load (sync, copy), its
  body's errors untranslated; `commit=False` rolls it back (a dry run);
- `transaction()`: a block of calls, all of them or none; nested, a savepoint;
- `snapshot()`: one read transaction of a whole store, every statement at one instant;
- `run_driver(work)`, `bulk_load(work)`, `driver_read(...)`, `rows`, `stream`: pre-compiled
  statements straight on the driver (the hot paths);
- `outside_transaction()`: a driver connection outside any transaction, in the writers' turn
  (`VACUUM`);
- `lend(bind)` (`upgrade_connection.py`): a connection whose transactions its borrower begins
  itself (Alembic's migration context), its writes in the writers' turn (`Lent.writing`).

One subclass per way of holding connections: `SQLiteConnector` keeps one connection for the
Store's life (threads take turns on it; concurrent checkpoints share commits),
`PooledConnector` borrows from the pool and keeps a few driver connections for the hot paths
(PostgreSQL). `connector_at(target)` is a connector of its own outside any Store (sync's
destination, a copy's target, the command's look). Driver errors leave as typed
`StoreError`s, translated (`typed`) by the one translation (`translation.py`) from the
backend's error codes (`typed_errors.py`: how errors leave a connector).

Inside `transaction()` every call of the same thread (or asyncio task: the open block is
context-local, `open_block.py`) joins the one open transaction; a write there runs in its own
savepoint.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.sql import ClauseElement

from ..dialects import Backend
from ..dialects.base import KEEP_ORPHANS, WRITE_DEADLINE, WRITE_TRANSACTION
from ..errors import StoreClosedError, StoreError, TransactionOpenError
from .driver import DriverStatement
from .kept_connections import Awaited
from .open_block import ActiveBlock, BlockState
from .typed_errors import TypedErrors

Work = Sequence[tuple[DriverStatement, Any]]
"""Pre-compiled statements and their parameters, run in order."""


INHERITED: list[Any] = []
"""Connections a forked child inherited and dropped: referenced for the child's life so that
garbage collection never closes (or rolls back) what is still the parent's connection."""


class Connector(TypedErrors, ABC):
    """A Store's connections and the operations on them (see the module)."""

    def __init__(
        self, engine: Engine, backend: Backend, url: URL, *, busy_timeout: float | None = None
    ) -> None:
        self.engine = engine
        self.backend = backend
        self.url = url
        self._active = ActiveBlock()
        self._lock = threading.RLock()
        self._queue = backend.write_queue(url, busy_timeout=busy_timeout)
        self._begin_write = backend.begin_write_sql()
        self._adapted = bool(engine.dialect.is_async)
        """Whether the pool's connections are SQLAlchemy's asyncio adapters (an `AsyncStore`
        on PostgreSQL): the hot paths then drive the asyncio driver's own cursors (`Awaited`)."""
        self._binder = backend.binder(engine.dialect)
        """How `rows` and `stream` bind their statements: the engine's one binder, which
        the backend's bulk reads of a source (`driver_rows`) bind through too."""
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
        self._active = ActiveBlock()
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

    def _close_connections(self) -> None:
        """Close what this connector keeps beyond the pool."""

    def _check_open(self) -> None:
        if self.closed:
            raise StoreClosedError("this Store is closed")

    # --- units and blocks ----------------------------------------------------------------

    def read(self) -> AbstractContextManager[Connection]:
        """One read transaction: a SQLAlchemy `Connection` in it. Inside this context's open
        `transaction()` block the read joins the block as it is."""
        return self._unit(False, False, False)

    def write(self) -> AbstractContextManager[Connection]:
        """One write transaction, in the writers' turn (`BEGIN IMMEDIATE` on SQLite): a
        SQLAlchemy `Connection` in it, committed when the body ends and rolled back when it
        raises. Inside this context's open `transaction()` block it is a savepoint, so a failed
        call is undone alone and the block goes on (on PostgreSQL an error would otherwise
        abort the whole transaction)."""
        return self._unit(True, False, False)

    @contextmanager
    def load(self, *, commit: bool = True, keep_orphans: bool = False) -> Iterator[Connection]:
        """One write transaction of a bulk load (sync's and copy's rows into this store), in
        the writers' turn, outside any block. The body reads its source as it writes, so its
        errors leave as they are, untranslated (the caller tells the source's from this
        store's); only beginning and committing are this store's own.

        `commit=False` rolls it back at the end instead (a dry run: what would be written).
        `keep_orphans=True` carries rows whose parent is missing (a copy of a store written
        with foreign keys off): SQLite's foreign keys are off for the transaction."""
        self._check_open()
        if self._active.conn is not None:
            raise TransactionOpenError(
                "a bulk load cannot join a transaction() block (nothing was written)"
            )
        with self._borrow() as conn, self._engine_unit(conn, True, commit, keep_orphans) as unit:
            yield unit

    @contextmanager
    def _unit(self, write: bool, driver: bool, alone: bool) -> Iterator[Any]:
        """The one way a call gets its transaction; every read and write goes through it.

        Yields a SQLAlchemy `Connection`, or with `driver` the driver object to run
        pre-compiled statements on (the hot paths, with no SQLAlchemy machinery per
        statement). `alone` promises one statement: on a pooled connection it then runs in
        autocommit, atomic by itself, saving the BEGIN and COMMIT round trips. Driver errors
        leave here as typed `StoreError`s.
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
    def _engine_unit(
        self, conn: Connection, write: bool, commit: bool = True, orphans: bool = False
    ) -> Iterator[Connection]:
        """A SQLAlchemy transaction of its own on `conn`, a write in the writers' turn;
        rolled back at the end unless `commit`; foreign keys off for it with `orphans`."""
        conn.info[WRITE_TRANSACTION] = write
        with self._queue.turn() if write else nullcontext() as deadline:
            conn.info[WRITE_DEADLINE] = deadline
            if orphans:
                conn.info[KEEP_ORPHANS] = True
            try:
                with conn.begin() as own:
                    self._active.set(conn, write)
                    try:
                        yield conn
                    finally:
                        self._active.set(None, False)
                    if not commit:
                        own.rollback()
                    elif write:
                        self.commit(own.commit, own.rollback)
            finally:
                if orphans:
                    conn.info.pop(KEEP_ORPHANS, None)
                    self.backend.foreign_keys_back(conn)

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
            conn.info[WRITE_TRANSACTION] = True
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
            self.commit(outer.commit, outer.rollback)

    @contextmanager
    def outside_transaction(self) -> Iterator[Any]:
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
        with self._unit(True, True, len(work) == 1 and not many) as unit:
            run = unit.executemany if many else unit.execute
            for statement, params in work:
                run(statement.sql, params)

    def bulk_load(self, work: Work) -> None:
        """`run_driver` with each statement run on a sequence of parameter sets."""
        self.run_driver(work, many=True)

    def driver_read(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
        """One pre-compiled SELECT on the driver connection, as its own snapshot (the hot read
        path of tree aggregates)."""
        with self._unit(False, True, True) as unit:
            return unit.execute(statement.sql, statement.params(values)).fetchall()  # type: ignore[no-any-return]

    def rows(self, conn: Connection, statement: ClauseElement) -> list[Any]:
        """The rows of `statement` read on `conn`'s driver connection, inside the unit `conn`
        belongs to, as plain tuples: for reads of many rows, where building a SQLAlchemy
        `Row` for each costs more than reading them. Parameters are bound, never inlined."""
        sql, params = self._bound(statement)
        dbapi_connection = conn.connection.dbapi_connection
        cursor = self.driver_cursor(dbapi_connection)
        try:
            return list(cursor.execute(sql, params).fetchall())
        except Exception as exc:
            self.raise_on(dbapi_connection, exc)
        finally:
            cursor.close()

    def stream(
        self,
        conn: Connection,
        statement: ClauseElement,
        batch_rows: int,
        values: Mapping[str, Any] | None = None,
    ) -> Iterator[list[Any]]:
        """The rows of `statement` read on `conn`'s driver connection as they are consumed, in
        lists of at most `batch_rows` plain tuples, inside the unit `conn` belongs to: `rows`
        for reads too large to hold at once (an Arrow export). One batch is held at a time:
        SQLite steps its cursor, PostgreSQL reads through a server-side cursor. `values` are
        the parameters of a statement its reader built once (see `_bound`)."""
        sql, params = self._bound(statement, values)
        dbapi_connection = conn.connection.dbapi_connection
        cursor = self._streaming_cursor(dbapi_connection)
        try:
            try:
                cursor.execute(sql, params)
            except Exception as exc:
                self.raise_on(dbapi_connection, exc)
            while batch := cursor.fetchmany(batch_rows):
                last = len(batch) < batch_rows  # before the reader has it (it may empty it)
                yield batch
                if last:
                    break  # the last: a short batch is only ever the end (no FETCH more)
        finally:
            cursor.close()

    def _bound(
        self, statement: ClauseElement, values: Mapping[str, Any] | None = None
    ) -> tuple[str, Any]:
        """`statement` as the driver takes it, bound by the engine's one `StatementBinder`
        (compiled once; refused past the driver's parameter limit)."""
        return self._binder.bound(statement, values)

    def _streaming_cursor(self, dbapi_connection: Any) -> Any:
        """The cursor `stream` reads with: a plain one, which fetches as it is stepped."""
        return self.driver_cursor(dbapi_connection)

    def driver_cursor(self, dbapi_connection: Any) -> Any:
        """A cursor on a driver connection for the hot paths; behind an asyncio adapter, a
        cursor of the asyncio driver's own connection, awaited in the call's greenlet."""
        if self._adapted:
            return Awaited(dbapi_connection.driver_connection.cursor())
        return dbapi_connection.cursor()
