"""The Store's hot paths on the driver connection, and the one place driver errors are typed.

Checkpoints and tree aggregates run pre-compiled statements straight on the driver: on SQLite
through group commit on the Store's one connection (`group`), on PostgreSQL on a kept
connection in autocommit (`held`), and inside `Store.transaction()` in the block's own
transaction (a savepoint per call, through `StoreBase._unit`). Every error leaves as a typed
`StoreError`, translated from the backend's error codes in `_typed`.
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NoReturn

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.sql import ClauseElement

from ..dialects import Backend
from ..dialects.base import WriteQueue
from ..errors import StoreConnectionError, StoreError
from .group import Call, GroupCommit
from .held import HeldConnections


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


LATE_ROUNDS = 2
"""How many times a batch takes in the callers that queued while it ran, before its COMMIT:
they share this COMMIT instead of waiting for it and the next; bounded, so that the leading
caller's own call is not held back indefinitely."""


class DriverPaths:
    """The hot write and read paths and error typing; `StoreBase` provides the state."""

    _backend: Backend
    _active: Any
    _closed: bool
    _lock: Any
    _cursor: Any
    _queue: WriteQueue
    _group: GroupCommit
    _kept: HeldConnections | None

    if TYPE_CHECKING:

        def _unit(
            self, *, write: bool, driver: bool = False, alone: bool = False
        ) -> AbstractContextManager[Any]: ...

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
            if self._kept is not None and self._kept_write(work, many):
                return
        with self._unit(write=True, driver=True, alone=len(work) == 1 and not many) as unit:
            run = unit.executemany if many else unit.execute
            for statement, params in work:
                run(statement.sql, params)

    def _driver_read(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
        """One pre-compiled SELECT on the driver connection, as its own snapshot: the hot read
        path of tree aggregates."""
        held = None
        if self._active.conn is None and self._kept is not None and not self._closed:
            held = self._kept.take()
        if held is not None:
            assert self._kept is not None
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

    def _kept_write(self, work: Sequence[tuple[DriverStatement, Any]], many: bool) -> bool:
        """Pre-compiled statements on a kept connection (pooled backends): one statement in
        autocommit, atomic by itself (one round trip), or several in one transaction. A lost
        connection raises `StoreConnectionError`, saying whether the call may have committed
        (an autocommitted statement may have), and is never reused. False when no kept
        connection is free on the event loop (the call then borrows one)."""
        assert self._kept is not None
        try:
            held = self._kept.take()
        except Exception as exc:
            self._raise_typed(exc)
        if held is None:
            return False
        alone = len(work) == 1 and not many
        reusable = False
        try:
            cursor = held.cursor
            if alone:
                statement, params = work[0]
                cursor.execute(statement.sql, params)
            else:
                with held.transaction():
                    run = cursor.executemany if many else cursor.execute
                    for statement, params in work:
                        run(statement.sql, params)
            reusable = True
        except Exception as exc:
            reusable = self._backend.connection_idle(held.driver)
            self._raise_typed(exc, may_have_committed=alone)
        finally:
            self._kept.give(held, reusable)
        return True

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
                solo = len(calls) == 1
                if solo:
                    # The lone caller's path: no savepoint. Callers that queued while its
                    # statements ran join its COMMIT rather than wait for it and then their own.
                    call = calls[0]
                    try:
                        _execute(cursor, call)
                    except Exception as exc:
                        cursor.connection.rollback()
                        call.error = self._error_of(exc, interrupted=exc)
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
                        _execute_together(cursor, calls[first:])
                        for _ in range(LATE_ROUNDS):
                            joined = late()
                            if not joined:
                                break
                            calls += joined
                            _execute_together(cursor, joined)
                    except Exception as exc:
                        if self._typed(exc) is None:
                            raise  # not a call's own failure: the batch is interrupted
                        cursor.execute("ROLLBACK TO hs_batch")
                        self._one_by_one(cursor, calls[first:])
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


def _execute(cursor: Any, call: Call) -> None:
    """Run one caller's pre-compiled statements on a driver cursor, in order."""
    if call.many:
        for statement, params in call.work:
            cursor.executemany(statement.sql, params)
    else:
        for statement, params in call.work:
            cursor.execute(statement.sql, params)


def _execute_together(cursor: Any, calls: list[Call]) -> None:
    """Run several callers' statements, those of consecutive callers that run the same
    statements one row each (checkpoints) as one `executemany` per statement: the same rows
    in the same order per table, for less per-statement work on the driver. (The Store's
    driver writes insert rows that do not read one another, so running statement by statement
    across callers, rather than caller by caller, changes nothing but the interleaving.)"""
    i, n = 0, len(calls)
    while i < n:
        call = calls[i]
        work = call.work
        j = i + 1
        if not call.many:
            while j < n and not calls[j].many and _same(calls[j].work, work):
                j += 1
        if j - i == 1:
            _execute(cursor, call)
        else:
            group = calls[i:j]
            for k, (statement, _) in enumerate(work):
                cursor.executemany(statement.sql, [c.work[k][1] for c in group])
        i = j


def _same(work: Sequence[tuple[Any, Any]], other: Sequence[tuple[Any, Any]]) -> bool:
    """Whether two calls run the same statements (the same compiled objects, in order)."""
    return len(work) == len(other) and all(a[0] is b[0] for a, b in zip(work, other, strict=True))
