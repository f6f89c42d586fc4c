"""Where driver errors become ours: the one translation of the package's database errors, as
httpx maps its transports' errors in one place.

A driver error (`sqlite3`'s, psycopg's, or SQLAlchemy's wrapping of either) is known by its
backend's code — SQLite's result code, PostgreSQL's SQLSTATE — in each backend's table
(`Backend.translate_error`), never by its message; what the code does not say, the state of
the connection does. The rest of the package reads nothing of a driver error: it branches on
the typed errors of `harness_store.errors` (`typed` gives one for any database error) and on
what this module says of an error (`is_disk_full`, `is_malformed`, `plain_message`) —
`tests/test_error_boundary.py` holds that.
"""

from __future__ import annotations

import errno
import sqlite3

from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from ..dialects import Backend, backend_named
from ..dialects.postgresql_codes import DISK_FULL_STATE, sqlstate_of
from ..dialects.sqlite_codes import (
    SQLITE_CORRUPT,
    SQLITE_ERROR,
    SQLITE_FULL,
    SQLITE_IOERR,
    SQLITE_NOTADB,
)
from ..dialects.sqlite_codes import primary_code as sqlite_code
from ..errors import StoreError

DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""The operating system's "no space left" (a full disk, a file size limit, a quota)."""


def driver_error(exc: BaseException) -> BaseException:
    """The driver's own error behind `exc` (a SQLAlchemy error's `orig`), else `exc`."""
    return exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc


def _backend_of(orig: BaseException) -> Backend | None:
    """The backend whose driver raised `orig`, None for an error no driver raised."""
    if isinstance(orig, sqlite3.Error):
        return backend_named("sqlite")
    if type(orig).__module__.startswith("psycopg"):
        return backend_named("postgresql")
    return None


def translated(
    backend: Backend | None, exc: BaseException, *, connection_intact: bool | None = None
) -> StoreError | None:
    """The typed `StoreError` the backend's error code (SQLite's result code, PostgreSQL's
    SQLSTATE) of a driver error names, or None: the one translation of the package's database
    errors (a SQLAlchemy error is translated by its driver error). `backend` None: the
    backend whose driver raised it.

    Where the code says nothing (psycopg's `OperationalError` without SQLSTATE: no answer of
    the server's), the connection's state does: `connection_intact` when the caller ran the
    statement on the driver itself; for a SQLAlchemy error raised by a statement, whether
    SQLAlchemy found its connection lost (`connection_invalidated`, from the driver's own
    closed and broken flags); otherwise unknown, taken as lost."""
    orig = driver_error(exc)
    backend = backend if backend is not None else _backend_of(orig)
    if backend is None:
        return None
    if connection_intact is None:
        connection_intact = (
            isinstance(exc, DBAPIError)
            and exc.statement is not None
            and not exc.connection_invalidated
        )
    return backend.translate_error(orig, connection_intact=connection_intact)


def is_database_error(exc: BaseException) -> bool:
    """Whether `exc` is a database's (a driver's, SQLAlchemy's, or a text the driver could
    not encode) rather than the caller's own."""
    database = isinstance(exc, SQLAlchemyError | sqlite3.Error | UnicodeEncodeError)
    return database or type(exc).__module__.startswith("psycopg")


def typed(
    backend: Backend | None, exc: BaseException, *, connection_intact: bool | None = None
) -> StoreError | None:
    """The `StoreError` for a database error — its translation (`translated`), or a plain
    `StoreError` naming the driver's error where no code of it has a class — and None for an
    error that is no database's (a `StoreError` among them)."""
    found = translated(backend, exc, connection_intact=connection_intact)
    if found is not None:
        return found
    if not is_database_error(exc):
        return None
    orig = driver_error(exc)
    return StoreError(f"{type(orig).__name__}: {orig}")


def typed_or_same(exc: BaseException) -> BaseException:
    """`exc` as a caller branches on it: its `StoreError` (`typed`, from `exc`) when it is a
    database error, else `exc` itself."""
    found = typed(None, exc)
    if found is None:
        return exc
    found.__cause__ = exc
    return found


def plain_message(exc: BaseException) -> str | None:
    """How a person is told of a database error that no code of its driver translates
    ("SQLite error: …", "PostgreSQL error: …", "database error: …"); None for an error that is
    no database's."""
    orig = driver_error(exc)
    if isinstance(orig, sqlite3.Error):
        return f"SQLite error: {orig}"
    if type(orig).__module__.startswith("psycopg"):
        return f"PostgreSQL error: {orig}"
    if isinstance(exc, SQLAlchemyError):
        return f"database error: {exc}"
    return None


def driver_message(exc: BaseException) -> str:
    """What the driver said of a database error (its message, as the driver gave it)."""
    return str(driver_error(exc))


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the errors it was raised from (its cause, theirs, …), nearest first."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not f for f in found) and len(found) < 16:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error (a driver's or the operating system's, or one raised from such) means
    the disk, a quota or a size limit is exhausted."""
    for current in _chain(exc):
        orig = driver_error(current)
        if sqlite_code(orig) in (SQLITE_FULL, SQLITE_IOERR):
            return True
        if sqlstate_of(orig) == DISK_FULL_STATE:
            return True
        if isinstance(orig, OSError) and orig.errno in DISK_ERRNOS:
            return True
    return False


def is_malformed(exc: BaseException) -> bool:
    """Whether a driver error says the file's pages are damaged or it is no database."""
    return sqlite_code(driver_error(exc)) in (SQLITE_CORRUPT, SQLITE_NOTADB)


def is_untranslated(exc: BaseException) -> bool:
    """Whether `exc` is a driver's error that no code of its backend translates: for a read
    of a SQLite source, the `sqlite3` module's own failure (a text whose bytes are not UTF-8)
    rather than the database's."""
    orig = driver_error(exc)
    return _backend_of(orig) is not None and translated(None, orig) is None


def is_generic(exc: BaseException) -> bool:
    """Whether a driver error carries SQLite's generic result code, which no other code
    names: how SQLite fails a `SUM` past 64 bits (PostgreSQL's is `IntegerOverflowError`)."""
    return sqlite_code(driver_error(exc)) == SQLITE_ERROR


def is_constraint_violation(exc: BaseException) -> bool:
    """Whether a statement broke a constraint of the database's (a unique key, a foreign
    key): the DB-API's `IntegrityError`, whichever driver raised it."""
    return isinstance(exc, IntegrityError)
