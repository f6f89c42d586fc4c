"""A store file looked at from outside the Store: plain sqlite3 connections and SQLite's own
integrity check (after a crash, a kill or a race), what `detect` makes of the file, and a
store left with a hot rollback journal."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine

from harness_store.schema.detect import Diagnosis, diagnose

from .clirun import step_store


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


def make_hot_journal(path: Path) -> None:
    """A rollback-journal store whose writer was SIGKILLed mid-transaction (as io-harness
    before 0.12 could be): the file half-written, its `-journal` hot."""
    step_store(path, 10)
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    writer = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA cache_size = 2')\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "for i in range(3000):\n"
        "    conn.execute(\"UPDATE steps SET result = ? WHERE step = ?\", ('x' * 2000, i % 10))\n"
        '    conn.execute("INSERT INTO memory (workspace, key, value, run_id, step, created_at) "\n'
        "                 \"VALUES ('ws', ?, ?, 1, 1, 'now')\", (str(i), 'v' * 500))\n"
        "os.kill(os.getpid(), 9)\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(path)], check=False)
    journal = path.with_name(path.name + "-journal")
    assert journal.exists() and journal.stat().st_size > 0
