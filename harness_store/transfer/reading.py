"""Opening a SQLite source that sync or copy only reads: read-only, leaving no side files,
checked for damage before a row is read.

Which file is read as still (`immutable=1`) is decided in `dialects.still`, for every
read-only open; a writer that opens a source while sync or copy reads it as still is noticed
afterwards (`writer_appeared`) and the read is done again through `mode=ro`, so a snapshot is
never torn.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.engine import URL

from ..dialects.still import (
    FileMark,
    file_mark,
    in_wal_mode,
    read_as_still_file,
    read_only_file_url,
    side_files,
)
from ..dialects.still import writer_appeared as writer_appeared
from ..errors import MalformedStoreError
from ..schema.preflight import is_malformed

__all__ = [
    "FileMark",
    "file_mark",
    "in_wal_mode",
    "read_as_still_file",
    "side_files",
    "source_url",
    "writer_appeared",
]


def source_url(path: Path, *, immutable: bool) -> URL:
    """A read-only URL of the SQLite file at `path` (`immutable=1` when asked)."""
    return read_only_file_url(path, immutable=immutable)


def malformed_source_message(shown: str, detail: str, action: str) -> str:
    """What a person reads about a damaged source of a sync or copy."""
    return (
        f"{shown} is a damaged SQLite database (PRAGMA quick_check: {detail}); nothing of it "
        f"was {action}. Recover its rows with the sqlite3 shell's `.recover` into a new file, "
        "or restore a backup, and use that instead"
    )


def check_source_pages(conn: Connection, shown: str, action: str) -> None:
    """`PRAGMA quick_check` on a source, before any of its rows is read: a damaged one raises
    `MalformedStoreError` naming it (`action`: what was not done with it, e.g. "synced")."""
    try:
        rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(5)")]
    except Exception as exc:
        if is_malformed(exc):
            raise MalformedStoreError(malformed_source_message(shown, str(exc), action)) from None
        raise
    if rows != ["ok"]:
        lines = [ln for row in rows for ln in row.splitlines() if not ln.startswith("***")]
        raise MalformedStoreError(malformed_source_message(shown, "; ".join(lines[:3]), action))
