"""Plain sqlite3 access to a store file, for the tests that look at it without harness_store
(after a crash, a kill or a race)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def connect(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection in autocommit (opening it runs SQLite's crash recovery,
    nothing more)."""
    return sqlite3.connect(path, isolation_level=None)


def integrity_ok(path: Path) -> None:
    """Fail unless SQLite's `integrity_check` finds the file sound."""
    conn = connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
