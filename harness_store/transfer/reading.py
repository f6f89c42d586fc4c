"""Opening a SQLite source that sync or copy only reads: read-only, leaving no side files,
checked for damage before a row is read.

A WAL store opened read-only through `mode=ro` makes SQLite create its `-wal` and `-shm`,
which a read-only connection cannot remove when it closes; on read-only media it cannot
create them at all, and the open fails. So a WAL store that has no side files (no connection
has it open) or whose directory is not writable is read with `immutable=1`, as a file nothing
changes; a writer that opens it meanwhile is noticed afterwards (`writer_appeared`) and the
read is done again through `mode=ro`, so a snapshot is never torn.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Connection
from sqlalchemy.engine import URL

from ..errors import MalformedStoreError
from ..preflight import is_malformed

SIDE_SUFFIXES = ("-wal", "-shm")


def side_files(path: Path) -> list[Path]:
    """The `-wal` and `-shm` files SQLite keeps beside a WAL store while it is open."""
    return [path.with_name(path.name + suffix) for suffix in SIDE_SUFFIXES]


def in_wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL (read and write versions 2)."""
    with path.open("rb") as handle:
        header = handle.read(20)
    return header[18:20] == b"\x02\x02"


def read_as_still_file(path: Path) -> bool:
    """Whether to read the store with `immutable=1` (see the module docstring)."""
    if not in_wal_mode(path):
        return False
    if not any(p.exists() for p in side_files(path)):
        return True
    return not os.access(path.parent, os.W_OK)


def source_url(path: Path, *, immutable: bool) -> URL:
    """A read-only URL of the SQLite file at `path` (`immutable=1` when asked)."""
    uri = "file:" + quote(str(path.absolute()), safe="/")
    query = {"mode": "ro", "uri": "true"}
    if immutable:
        query["immutable"] = "1"
    return URL.create("sqlite", database=uri, query=query)


def writer_appeared(path: Path) -> bool:
    """Whether a writer opened the store while it was read as a still file: its side files
    are there now (a writable directory; on read-only media nothing can write it)."""
    return os.access(path.parent, os.W_OK) and any(p.exists() for p in side_files(path))


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
