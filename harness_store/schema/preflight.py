"""Checks made before a store is read or upgraded, for stores left behind by crashes and odd
media: an unfinished transaction (hot rollback journal), damaged pages, a full disk.

Everything here only reads; the upgrade (`migrate`) and the read-only opens call it so that a
store that cannot be used gets a typed error naming the cause, and nothing is written.
"""

from __future__ import annotations

import errno
from pathlib import Path

from sqlalchemy import Connection

from ..dialects.sqlite_files import blocked_by_hot_journal
from ..errors import MalformedStoreError, UnfinishedTransactionError

SQLITE_FULL = 13
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26

PG_DISK_FULL = "53100"
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})

UNFINISHED = (
    "this store has an unfinished transaction (a process was killed while writing it); "
    "`harness-store upgrade` or any write recovers it"
)


def journal_of(path: Path) -> Path:
    """The rollback journal SQLite keeps beside a store in its pre-WAL modes."""
    return path.with_name(path.name + "-journal")


def check_readable(path: Path) -> None:
    """Raise `UnfinishedTransactionError` when a hot rollback journal beside `path` stops a
    read-only open from reading it (only a write connection can roll the journal back)."""
    journal = journal_of(path)
    if not path.is_file() or not journal.is_file() or journal.stat().st_size == 0:
        return
    if blocked_by_hot_journal(path):
        raise UnfinishedTransactionError(f"{path}: {UNFINISHED}")


def is_malformed(exc: BaseException) -> bool:
    """Whether a driver error says the file's pages are damaged or not a database."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error (driver or OS) means the disk, a quota or a size limit is exhausted."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        orig = getattr(current, "orig", None) or current
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in (SQLITE_FULL, SQLITE_IOERR):
            return True
        if getattr(orig, "sqlstate", None) == PG_DISK_FULL:
            return True
        if isinstance(orig, OSError) and orig.errno in DISK_ERRNOS:
            return True
        current = current.__cause__ or current.__context__
    return False


def quick_check(conn: Connection, where: str) -> None:
    """Run `PRAGMA quick_check` (SQLite) and raise `MalformedStoreError` unless it says ok."""
    try:
        rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(5)")]
    except Exception as exc:
        if is_malformed(exc):
            raise MalformedStoreError(malformed_message(where, str(exc))) from None
        raise
    if rows != ["ok"]:
        lines = [ln for row in rows for ln in row.splitlines() if not ln.startswith("***")]
        shown = "; ".join(lines[:3]) + (f"; … ({len(lines) - 3} more)" if len(lines) > 3 else "")
        raise MalformedStoreError(malformed_message(where, shown))


def malformed_message(where: str, detail: str) -> str:
    """What a person reads about a damaged store."""
    return (
        f"{where} is a damaged SQLite database (PRAGMA quick_check: {detail}); it cannot be "
        "upgraded, and nothing was changed or backed up. Recover its rows with the sqlite3 "
        "shell's `.recover` into a new file, or restore a backup"
    )
