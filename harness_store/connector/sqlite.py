"""`SQLiteConnector`: one connection kept for the Store's life, as upstream keeps one
`rusqlite::Connection`; threads take turns on it under a lock, their concurrent checkpoints
share commits (`group`), and write transactions begin with `BEGIN IMMEDIATE`, so a second
process waits on the busy timeout (and the writers' queue) instead of failing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from typing import Any, NoReturn

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from ..dialects import Backend
from ..dialects.sqlite_text import read_tables, undecodable
from ..errors import StoreClosedError, StoreError, TransactionOpenError
from .base import INHERITED, Connector, Work
from .driver import LATE_ROUNDS, execute_call, execute_together
from .group import Call, GroupCommit


class SQLiteConnector(Connector):
    """The held connection, group commit and the writers' queue (see the module)."""

    def __init__(
        self, engine: Engine, backend: Backend, url: URL, *, busy_timeout: float | None = None
    ) -> None:
        super().__init__(engine, backend, url, busy_timeout=busy_timeout)
        self._held: Connection | None = None
        self.raw: Any = None
        """The held connection's driver connection, for the hot path."""
        self._cursor: Any = None
        """A cursor on `raw`, kept for the hot path's statements."""
        self._group = GroupCommit(self._commit_calls)
        self._hold()

    def _hold(self) -> None:
        """Take the connection kept for the Store's life."""
        self._held = self.engine.connect()
        self.raw = self._held.connection.dbapi_connection
        self._cursor = self.raw.cursor()

    def _see_writers(self) -> None:
        """Replace a held connection that reads its file as still (`immutable=1`) once a
        writer has opened the file, so this read sees the writer's commits (a read-only
        Store; see `dialects.read_only_files`). Under the lock, outside any block."""
        held = self._held
        if held is None or not self.backend.still_read_outdated(held):
            return  # the common case: a dictionary look-up
        if held.in_transaction() or self.raw.in_transaction:
            return
        self._release()
        self._hold()

    def _release(self) -> None:
        if self._held is not None:
            self._held.close()
        self._held = None
        self.raw = None
        self._cursor = None

    @contextmanager
    def released(self) -> Iterator[None]:
        self._release()
        yield
        self._hold()

    def _close_connections(self) -> None:
        self._release()

    def forked(self) -> None:
        super().forked()
        self._group = GroupCommit(self._commit_calls)
        if self.closed or self.backend.shares_memory(self.engine):
            return  # an in-memory database exists only on its one connection: keep it
        if self._held is not None:
            INHERITED.append(self._held)  # kept referenced, so it is never finalized here
            self._held = None
            self.raw = None
            self._cursor = None
        self.engine.dispose(close=False)
        self._hold()

    def raise_typed(
        self,
        exc: Exception,
        *,
        may_have_committed: bool = False,
        connection_intact: bool | None = None,
    ) -> NoReturn:
        """A read that failed on text whose bytes are not UTF-8 (the `sqlite3` module's
        error names no row) is `UnreadableValueError` naming the first such text of the
        tables it read (`dialects.sqlite_text`); any other error as `Connector.raise_typed`."""
        named = self._undecodable(exc)
        if named is not None:
            raise named from None
        super().raise_typed(
            exc, may_have_committed=may_have_committed, connection_intact=connection_intact
        )

    def _undecodable(self, exc: Exception) -> Exception | None:
        """The error naming the row of a text the failed read could not decode, or None (no
        such failure, or none found: the error is said as it is)."""
        tables = read_tables(exc)
        if tables is None or self.closed:
            return None
        active = self._active.conn
        try:
            with nullcontext(active) if active is not None else self._borrow() as conn:
                if active is not None:
                    return undecodable(conn, tables, self.backend.table_columns(conn))
                with conn.begin():
                    return undecodable(conn, tables, self.backend.table_columns(conn))
        except Exception:  # the look failed too: the read's own error is said
            return None

    @contextmanager
    def _borrow(self) -> Iterator[Connection]:
        """The held connection, under the lock (while it is given back for an upgrade, a
        connection of the pool's)."""
        self._check_open()
        if self._held is None:
            with self.engine.connect() as conn:
                yield conn
            return
        with self._lock:
            if self._held is None:
                raise StoreClosedError("this Store is closed")
            self._see_writers()
            self._queue.settle(self.raw)
            yield self._held

    @contextmanager
    def _maintenance_driver(self) -> Iterator[Any]:
        with self._borrow(), self._queue.turn():
            raw = self.raw
            if raw.in_transaction:  # never commit what another context left open
                raise TransactionOpenError(
                    "a transaction is open on the store's connection; nothing was done"
                )
            yield raw

    @contextmanager
    def _own_unit(self, *, write: bool, driver: bool, alone: bool) -> Iterator[Any]:
        if not driver:
            with self._borrow() as conn, self._engine_unit(conn, write) as unit:
                yield unit
            return
        with self._lock:
            raw = self.raw
            if raw is None:
                raise StoreClosedError("this Store is closed")
            if not write:
                self._see_writers()
                raw = self.raw
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
            self.commit(raw.commit, raw.rollback)

    def run_driver(self, work: Work, *, many: bool = False) -> None:
        """Outside a block, concurrent callers are committed together (group commit)."""
        if self._active.conn is None:
            self._check_open()
            if self._cursor is not None:
                self._group.submit(work, many)
                return
        super().run_driver(work, many=many)

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
            if cursor is None or self.closed:
                for call in calls:
                    call.error = StoreClosedError("this Store is closed")
                return
            queue = self._queue
            try:
                queue.begin(cursor)
            except Exception as exc:
                for call in calls:
                    call.error = self.error_of(exc)
                return
            try:
                solo = len(calls) == 1
                if solo:
                    # The lone caller's path: no savepoint. Callers that queued while its
                    # statements ran join its COMMIT rather than wait for it and then their own.
                    call = calls[0]
                    try:
                        execute_call(cursor, call)
                    except Exception as exc:
                        cursor.connection.rollback()
                        call.error = self.error_of(exc, interrupted=exc)
                        return
                    joined = late()
                    if joined:
                        calls += joined
                if not solo or len(calls) > 1:
                    # Optimistically all calls at once; should one fail, undo them all and
                    # run each in a savepoint of its own, so it fails alone.
                    first = 1 if solo else 0
                    cursor.execute("SAVEPOINT hs_batch")
                    try:
                        execute_together(cursor, calls[first:])
                        for _ in range(LATE_ROUNDS):
                            joined = late()
                            if not joined:
                                break
                            calls += joined
                            execute_together(cursor, joined)
                    except Exception as exc:
                        if self.typed(exc) is None:
                            raise  # not a call's own failure: the batch is interrupted
                        cursor.execute("ROLLBACK TO hs_batch")
                        self._one_by_one(cursor, calls[first:])
                cursor.connection.commit()
            except BaseException as exc:
                with suppress(Exception):  # the error that broke the batch is the one to tell
                    cursor.connection.rollback()
                database = isinstance(exc, StoreError) or (
                    isinstance(exc, Exception) and self.typed(exc) is not None
                )
                for call in calls:
                    call.error = (
                        self.error_of(exc)  # type: ignore[arg-type]
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
                execute_call(cursor, call)
            except Exception as exc:
                if self.typed(exc) is None:
                    raise  # not the call's own failure: the batch is interrupted
                cursor.execute("ROLLBACK TO hs_call")
                call.error = self.error_of(exc)
            cursor.execute("RELEASE hs_call")
