"""A store file looked at from outside the Store: plain sqlite3 connections and SQLite's own
integrity check (after a crash, a kill or a race), and what `detect` makes of the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine

from harness_store.schema.detect import Diagnosis, diagnose


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


def diagnose_file(path: Path) -> Diagnosis:
    """What `harness_store.schema.detect` finds the SQLite file at `path` to be."""
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return diagnose(conn)
    finally:
        engine.dispose()
