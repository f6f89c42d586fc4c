"""The Store's connection and transaction handling, shared by every concern.

A Store reads through SQLAlchemy Core on a `Connection` and writes its hot paths (steps and
checkpoints) as pre-compiled statements straight on the driver connection, inside the same
kind of transaction. On SQLite a Store keeps one connection for its life, as upstream keeps one
`rusqlite::Connection`, and threads take turns on it under a lock; write transactions begin with
`BEGIN IMMEDIATE`, so a second process waits on the busy timeout instead of failing. On
PostgreSQL each operation borrows a pooled connection. Inside `Store.transaction()` every call
of the same thread joins the one open transaction.
"""

from __future__ import annotations

import copy
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NoReturn, TypeVar

from sqlalchemy import Connection, Engine, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import configure_mappers
from sqlalchemy.sql import ClauseElement

from .. import models as m
from ..dialects import Backend
from ..dialects.base import WRITE_DEADLINE
from ..dialects.sqlite import WRITE
from ..errors import RunNotFoundError, StoreConnectionError, StoreError
from .group import Call, GroupCommit
from .held import HeldConnections

T = TypeVar("T")


@dataclass(frozen=True)
class DriverStatement:
    """A Core statement compiled once for the engine's dialect, run on the driver directly."""

    sql: str
    names: tuple[str, ...] | None
    """Parameter order for a positional paramstyle; None when the driver takes a mapping."""

    @classmethod
    def compile(cls, statement: ClauseElement, engine: Engine) -> DriverStatement:
        compiled: Any = statement.compile(dialect=engine.dialect)
        names = tuple(compiled.positiontup or ()) if compiled.positional else None
        return cls(str(compiled), names)

    def params(self, values: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        """The parameters in the form the driver wants."""
        if self.names is None:
            return values
        if len(self.names) == 1:
            return (values[self.names[0]],)
        return itemgetter(*self.names)(values)  # type: ignore[no-any-return]


class _Active(threading.local):
    """The transaction this thread has open on this Store, if any."""

    conn: Connection | None = None
    write: bool = False


class StoreBase:
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
        return HeldConnections(self._engine, self._backend.connection_alive, cap) if cap else None

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
                unit = active.connection.dbapi_connection.cursor() if driver else active  # type: ignore[union-attr]
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
                            yield pooled.cursor()
                        return
                    pooled = conn.connection.dbapi_connection
                    assert pooled is not None
                    cursor = pooled.cursor()
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
                        self._active.conn, self._active.write = conn, write
                        try:
                            yield conn
                        finally:
                            self._active.conn, self._active.write = None, False
        except StoreError:
            raise
        except Exception as exc:
            self._raise_typed(exc, may_have_committed=committing)

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
            self._active.conn, self._active.write = conn, True
            try:
                yield
            except BaseException:
                self._active.conn, self._active.write = None, False
                outer.rollback()
                raise
            self._active.conn, self._active.write = None, False
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

    def _run_driver(
        self, work: Sequence[tuple[DriverStatement, Any]], *, many: bool = False
    ) -> None:
        """Run pre-compiled statements in one write transaction on the driver connection: the
        hot path of checkpoints. On SQLite, concurrent callers are committed together (group
        commit, see `group`); on a pooled connection a single statement runs in autocommit."""
        if self._active.conn is None:
            if self._closed:
                raise StoreError("this Store is closed")
            if self._cursor is not None:
                self._group.submit(work, many)
                return
            if self._kept is not None:
                self._kept_write(work, many)
                return
        with self._unit(write=True, driver=True, alone=len(work) == 1 and not many) as unit:
            run = unit.executemany if many else unit.execute
            for statement, params in work:
                run(statement.sql, params)

    def _driver_read(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
        """One pre-compiled SELECT on the driver connection, as its own snapshot: the hot read
        path of tree aggregates."""
        if self._active.conn is None and self._kept is not None and not self._closed:
            held = self._kept.take()
            reusable = False
            try:
                rows: list[Any] = held.cursor.execute(
                    statement.sql, statement.params(values)
                ).fetchall()
                reusable = True
                return rows
            except Exception as exc:
                reusable = self._backend.connection_idle(held.driver)
                self._raise_typed(exc)
            finally:
                self._kept.give(held, reusable)
        with self._unit(write=False, driver=True, alone=True) as unit:
            return unit.execute(statement.sql, statement.params(values)).fetchall()  # type: ignore[no-any-return]

    def _kept_write(self, work: Sequence[tuple[DriverStatement, Any]], many: bool) -> None:
        """Pre-compiled statements on a kept connection (pooled backends): one statement in
        autocommit, atomic by itself (one round trip), or several in one transaction. A lost
        connection raises `StoreConnectionError`, saying whether the call may have committed
        (an autocommitted statement may have), and is never reused."""
        assert self._kept is not None
        try:
            held = self._kept.take()
        except Exception as exc:
            self._raise_typed(exc)
        alone = len(work) == 1 and not many
        reusable = False
        try:
            cursor = held.cursor
            if alone:
                statement, params = work[0]
                cursor.execute(statement.sql, params)
            else:
                with held.driver.transaction():
                    run = cursor.executemany if many else cursor.execute
                    for statement, params in work:
                        run(statement.sql, params)
            reusable = True
        except Exception as exc:
            reusable = self._backend.connection_idle(held.driver)
            self._raise_typed(exc, may_have_committed=alone)
        finally:
            self._kept.give(held, reusable)

    def _commit_calls(self, calls: list[Call], late: Callable[[], list[Call]]) -> None:
        """Commit a group of callers' writes in one transaction on the held connection, one
        COMMIT for all. The calls run back to back (in one savepoint for the batch), joined by
        callers that queued meanwhile (a few rounds of them) before the COMMIT; if one fails,
        the batch is undone and run again with a savepoint per call, so the failing call is
        undone alone and gets its own typed error. A failure of the transaction itself
        (BEGIN, COMMIT) fails every call; an interruption of the
        committing thread rolls everything back and is re-raised in that thread."""
        with self._lock:
            cursor = self._cursor
            if cursor is None or self._closed:
                for call in calls:
                    call.error = StoreError("this Store is closed")
                return
            queue = self._queue
            try:
                queue.begin(cursor)
            except Exception as exc:
                for call in calls:
                    call.error = self._error_of(exc)
                return
            try:
                if len(calls) == 1:
                    call = calls[0]
                    try:
                        _execute(cursor, call)
                    except Exception as exc:
                        cursor.connection.rollback()
                        call.error = self._error_of(exc, interrupted=exc)
                        return
                else:
                    # Optimistically all calls at once; should one fail, undo them all and
                    # run each in a savepoint of its own, so it fails alone.
                    cursor.execute("SAVEPOINT hs_batch")
                    try:
                        for call in calls:
                            _execute(cursor, call)
                        for _ in range(LATE_ROUNDS):
                            joined = late()
                            if not joined:
                                break
                            calls += joined
                            for call in joined:
                                _execute(cursor, call)
                    except Exception as exc:
                        if self._typed(exc) is None:
                            raise  # not a call's own failure: the batch is interrupted
                        cursor.execute("ROLLBACK TO hs_batch")
                        self._one_by_one(cursor, calls)
                cursor.connection.commit()
            except BaseException as exc:
                with suppress(Exception):  # the error that broke the batch is the one to tell
                    cursor.connection.rollback()
                database = isinstance(exc, StoreError) or (
                    isinstance(exc, Exception) and self._typed(exc) is not None
                )
                for call in calls:
                    call.error = (
                        self._error_of(exc)  # type: ignore[arg-type]
                        if database
                        else StoreError(
                            "not committed: the thread committing this write together with "
                            f"others was interrupted ({type(exc).__name__})"
                        )
                    )
                if database:
                    return
                raise
            finally:
                queue.end()

    def _one_by_one(self, cursor: Any, calls: list[Call]) -> None:
        """Run a batch's calls each in its own savepoint: one that fails is undone alone and
        gets its own typed error."""
        for call in calls:
            cursor.execute("SAVEPOINT hs_call")
            try:
                _execute(cursor, call)
            except Exception as exc:
                if self._typed(exc) is None:
                    raise  # not the call's own failure: the batch is interrupted
                cursor.execute("ROLLBACK TO hs_call")
                call.error = self._error_of(exc)
            cursor.execute("RELEASE hs_call")

    def _error_of(self, exc: Exception, *, interrupted: Exception | None = None) -> BaseException:
        """A caller's own error for `exc` raised while its write was committed by any thread
        (a new object per caller): typed when it is a database error; `interrupted` when given
        and it is none (the call's own non-database error, raised as itself); else a
        `StoreError` saying the write was not committed."""
        if isinstance(exc, StoreError):
            return copy.copy(exc)
        typed = self._typed(exc)
        if typed is not None:
            typed.__cause__ = exc
            return typed
        if interrupted is not None:
            return interrupted
        return StoreError(f"not committed: {type(exc).__name__}: {exc}")

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Turn driver errors into typed `StoreError`s (locked, read-only, …)."""
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            self._raise_typed(exc)

    def _raise_typed(self, exc: Exception, *, may_have_committed: bool = False) -> NoReturn:
        """Raise `exc` as its typed `StoreError`, or unchanged when it is no database error.

        `may_have_committed` is true only for a statement that was its own commit: a lost
        connection then cannot say whether the server kept it."""
        if isinstance(exc, StoreError):
            raise exc
        typed = self._typed(exc)
        if typed is None:
            raise exc
        if isinstance(typed, StoreConnectionError):
            typed.may_have_committed = may_have_committed
        raise typed from exc

    def _typed(self, exc: Exception) -> StoreError | None:
        """The `StoreError` for a database error, or None for an error that is not one."""
        orig: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc
        typed = self._backend.translate_error(orig)
        if typed is not None:
            return typed
        database_error = isinstance(exc, SQLAlchemyError | sqlite3.Error | UnicodeEncodeError)
        if database_error or type(exc).__module__.startswith("psycopg"):
            return StoreError(f"{type(orig).__name__}: {orig}")
        return None

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


LATE_ROUNDS = 2
"""How many times a batch takes in the callers that queued while it ran, before its COMMIT:
they share this COMMIT instead of waiting for it and the next; bounded, so that the leading
caller's own call is not held back indefinitely."""

_INHERITED: list[Any] = []
"""Connections a forked child inherited and dropped: referenced for the child's life so that
garbage collection never closes (or rolls back) what is still the parent's connection."""


def _after_fork(ref: weakref.ref[StoreBase]) -> None:
    store = ref()
    if store is not None:
        store._forked()


def _execute(cursor: Any, call: Call) -> None:
    """Run one caller's pre-compiled statements on a driver cursor, in order."""
    if call.many:
        for statement, params in call.work:
            cursor.executemany(statement.sql, params)
    else:
        for statement, params in call.work:
            cursor.execute(statement.sql, params)


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
