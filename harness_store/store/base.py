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

import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.sql import ClauseElement

from .. import models as m
from ..dialects import Backend
from ..dialects.sqlite import WRITE
from ..errors import RunNotFoundError, StoreError

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
        return tuple(values[name] for name in self.names)


class _Active(threading.local):
    """The transaction this thread has open on this Store, if any."""

    conn: Connection | None = None
    write: bool = False


class StoreBase:
    """Connection handling; the concerns (runs, events, trees, memory) build on it."""

    def __init__(self, engine: Engine, backend: Backend, url: URL) -> None:
        self._engine = engine
        self._backend = backend
        self.url = url
        self._active = _Active()
        self._lock = threading.RLock()
        self._held: Connection | None = engine.connect() if backend.one_connection else None
        self._begin_write = backend.begin_write_sql()
        self._closed = False

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine behind this Store (for ORM sessions over the models)."""
        return self._engine

    @property
    def backend(self) -> Backend:
        """The backend ("sqlite" or "postgresql") this Store speaks through."""
        return self._backend

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Release the Store's connections. Idempotent."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            if self._held is not None:
                self._held.close()
                self._held = None
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
                yield self._held
        else:
            with self._engine.connect() as conn:
                yield conn

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        """A connection inside a transaction: this thread's open one, or a new one."""
        active = self._active.conn
        if active is not None:
            if write and not self._active.write:
                raise StoreError("cannot write inside a read-only transaction")
            yield active
            return
        with self._translated(), self._borrow() as conn:
            conn.info[WRITE] = write
            with conn.begin():
                self._active.conn, self._active.write = conn, write
                try:
                    yield conn
                finally:
                    self._active.conn, self._active.write = None, False

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several Store writes into one atomic transaction: all of them, or none.

        On SQLite the write lock is taken when the block starts. Store calls made inside the
        block by the same thread join it; other threads wait for it to finish.
        """
        with self._tx(write=True):
            yield

    def _write(self) -> Any:
        return self._tx(write=True)

    def _read(self) -> Any:
        return self._tx(write=False)

    @contextmanager
    def _driver(self) -> Iterator[Any]:
        """A driver-level cursor inside a write transaction: the hot path of checkpoints.

        Joins this thread's open transaction when there is one; otherwise opens one directly
        on the driver connection (`BEGIN IMMEDIATE` on SQLite) and commits it.
        """
        active = self._active.conn
        if active is not None:
            if not self._active.write:
                raise StoreError("cannot write inside a read-only transaction")
            with self._translated():
                yield active.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            return
        with self._translated(), self._borrow() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            cursor = raw.cursor()
            if self._begin_write is not None:
                cursor.execute(self._begin_write)
            try:
                yield cursor
            except BaseException:
                raw.rollback()
                raise
            else:
                raw.commit()
            finally:
                cursor.close()

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Turn driver errors into typed `StoreError`s (locked, read-only, …)."""
        try:
            yield
        except StoreError:
            raise
        except (SQLAlchemyError, sqlite3.Error, UnicodeEncodeError) as exc:
            orig: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc
            typed = self._backend.translate_error(orig)
            if typed is not None:
                raise typed from exc
            raise StoreError(f"{type(orig).__name__}: {orig}") from exc
        except Exception as exc:
            typed = self._backend.translate_error(exc)
            if typed is not None:
                raise typed from exc
            if type(exc).__module__.startswith("psycopg"):
                raise StoreError(f"{type(exc).__name__}: {exc}") from exc
            raise

    def _run_column(self, run_id: int, column: Any, *, missing_ok: bool) -> Any:
        statement = select(column).where(m.Run.id == run_id)
        with self._read() as conn:
            row = conn.execute(statement).first()
        if row is None:
            if missing_ok:
                return None
            raise RunNotFoundError(f"no run with id {run_id} in the store")
        return row[0]

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
