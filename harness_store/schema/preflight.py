"""Checks made before a store is read or upgraded, for stores left behind by crashes and odd
media: an unfinished transaction (hot rollback journal), damaged pages, a full disk.

Everything here only reads; the upgrade (`migrate`) and the read-only opens call it so that a
store that cannot be used gets a typed error naming the cause, and nothing is written.
"""

from __future__ import annotations

import errno
from pathlib import Path

from sqlalchemy import Connection

from ..dialects.sqlite_codes import (
    SQLITE_CORRUPT,
    SQLITE_FULL,
    SQLITE_IOERR,
    SQLITE_NOTADB,
    primary_code,
)
from ..dialects.sqlite_files import blocked_by_hot_journal
from ..dialects.still import JOURNAL_SUFFIX, beside
from ..errors import MalformedStoreError, UnfinishedTransactionError

PG_DISK_FULL = "53100"
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})

UNFINISHED = (
    "this store has an unfinished transaction (a process was killed while writing it); "
    "`harness-store upgrade` or any write recovers it"
)


def unfinished_transaction(path: Path) -> bool:
    """Whether a hot rollback journal beside `path` (left by a process killed while writing)
    stops a read-only open from reading it: only a write connection can roll it back."""
    journal = beside(path, JOURNAL_SUFFIX)
    if not path.is_file() or not journal.is_file() or journal.stat().st_size == 0:
        return False
    return blocked_by_hot_journal(path)


def check_readable(path: Path) -> None:
    """Raise `UnfinishedTransactionError` when `unfinished_transaction(path)`."""
    if unfinished_transaction(path):
        raise UnfinishedTransactionError(f"{path}: {UNFINISHED}")


def is_malformed(exc: BaseException) -> bool:
    """Whether a driver error says the file's pages are damaged or not a database."""
    return primary_code(exc) in (SQLITE_CORRUPT, SQLITE_NOTADB)


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error (driver or OS) means the disk, a quota or a size limit is exhausted."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        orig = getattr(current, "orig", None) or current
        if primary_code(orig) in (SQLITE_FULL, SQLITE_IOERR):
            return True
        if getattr(orig, "sqlstate", None) == PG_DISK_FULL:
            return True
        if isinstance(orig, OSError) and orig.errno in DISK_ERRNOS:
            return True
        current = current.__cause__ or current.__context__
    return False


def damage_found(conn: Connection) -> str | None:
    """What `PRAGMA quick_check` (SQLite) says is wrong with the database on `conn` (its first
    three complaints, and how many more), or None when it says ok. A file too damaged for the
    check to run is named by the driver's error."""
    try:
        rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(5)")]
    except Exception as exc:
        if is_malformed(exc):
            return str(exc)
        raise
    if rows == ["ok"]:
        return None
    lines = [ln for row in rows for ln in row.splitlines() if not ln.startswith("***")]
    return "; ".join(lines[:3]) + (f"; … ({len(lines) - 3} more)" if len(lines) > 3 else "")


def quick_check(conn: Connection, where: str, action: str | None = None) -> None:
    """Raise `MalformedStoreError` (`malformed_message`) unless `PRAGMA quick_check` of the
    store on `conn` says ok: a store to upgrade, or (`action`) a source to be synced or copied."""
    detail = damage_found(conn)
    if detail is not None:
        raise MalformedStoreError(malformed_message(where, detail, action))


def malformed_message(where: str, detail: str, action: str | None = None) -> str:
    """What a person reads about a damaged store: one to upgrade, or (`action`: what was not
    done with it, e.g. "synced") a source of a sync or copy."""
    head = f"{where} is a damaged SQLite database (PRAGMA quick_check: {detail}); "
    recover = (
        "Recover its rows with the sqlite3 shell's `.recover` into a new file, or restore a backup"
    )
    if action is not None:
        return f"{head}nothing of it was {action}. {recover}, and use that instead"
    return f"{head}it cannot be upgraded, and nothing was changed or backed up. {recover}"
