"""Checks made before a store is read or upgraded, for stores left behind by crashes and odd
media: an unfinished transaction (hot rollback journal), damaged pages, a full disk.

Everything here only reads; the upgrade (`migrate`) and the read-only opens call it so that a
store that cannot be used gets a typed error naming the cause, and nothing is written. What a
driver's error means (a full disk, damaged pages) is the translation's to say
(`connector.translation`: `is_disk_full`, `is_malformed`, which the modules that ask import
from here too).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection

from ..connector.translation import is_disk_full, is_malformed
from ..dialects.read_only_files import JOURNAL_SUFFIX, beside
from ..dialects.sqlite_files import blocked_by_hot_journal
from ..errors import MalformedStoreError, StoreError, UnfinishedTransactionError

__all__ = [
    "check_readable",
    "checked_stage",
    "damage_found",
    "is_disk_full",
    "is_malformed",
    "malformed_message",
    "quick_check",
    "unfinished_transaction",
]

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


@contextmanager
def checked_stage(stage: str, where: str) -> Iterator[None]:
    """Raise a damaged file as `MalformedStoreError`, whatever statement met it."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        if is_malformed(exc):
            raise MalformedStoreError(malformed_message(where, str(exc))) from exc
        raise
