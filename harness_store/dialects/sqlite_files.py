"""SQLite files handled before any Store exists: the pre-upgrade backup copy, and the probe
for an unfinished transaction that a read-only open could not roll back. Both open a driver
connection of their own (no engine, no Store); this module is where they do it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .read_only_files import file_uri
from .sqlite_codes import SQLITE_READONLY_ROLLBACK, error_code


def backup_copy(path: Path, partial: Path) -> None:
    """Copy the store at `path` into the (created, empty) file `partial` with SQLite's online
    backup, reading `path` through a read-only connection: a consistent copy even while a
    writer commits."""
    source = sqlite3.connect(file_uri(path) + "?mode=ro", uri=True, isolation_level=None)
    try:
        copy = sqlite3.connect(partial, isolation_level=None)
        try:
            source.backup(copy)
        finally:
            copy.close()
    finally:
        source.close()


def blocked_by_hot_journal(path: Path) -> bool:
    """Whether a read-only connection to `path` fails on a hot rollback journal (only a
    connection that can write rolls it back). Any other failure is not this one's to name:
    False, and the caller's own open reports it."""
    try:
        conn = sqlite3.connect(file_uri(path) + "?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        conn.execute("PRAGMA schema_version").fetchall()
    except sqlite3.Error as exc:
        return error_code(exc) == SQLITE_READONLY_ROLLBACK
    finally:
        conn.close()
    return False
