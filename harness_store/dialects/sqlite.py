"""SQLite: the embedded default, kept exactly in upstream's formats.

Transactions are controlled here, not by the `sqlite3` module: its legacy mode runs DDL in
autocommit (so a migration step could half-apply) and begins write transactions lazily (so two
writers deadlock instead of waiting). Every connection gets `isolation_level = None`, and the
engine's `begin` event emits `BEGIN IMMEDIATE` for writes and a plain `BEGIN` for reads, which
makes DDL transactional and makes a second writer wait on the busy timeout.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine, Table, event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool, StaticPool
from sqlalchemy.sql.dml import Insert

from ..errors import (
    InvalidValueError,
    RunNotFoundError,
    StoreAccessError,
    StoreError,
    StoreLockedError,
)
from ..formats import BUSY_TIMEOUT_SECONDS
from .base import Backend

WRITE = "hs_write"
"""`Connection.info` key or execution option: when true, `begin` takes the write lock up front
(`Store.write_engine` sets the option for ORM sessions)."""

KEEP_ORPHANS = "hs_keep_orphans"
"""`Connection.info` key: when true, the next `begin` turns foreign keys off first, so a copy
can carry a source's orphan steps (written by a tool that left foreign keys off) unchanged."""

SYNCHRONOUS = ("off", "normal", "full", "extra")

SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_READONLY = 8
SQLITE_CANTOPEN = 14
SQLITE_CONSTRAINT_FOREIGNKEY = 787
"""Result codes (https://sqlite.org/rescode.html); Python's sqlite3 reports extended codes."""


def is_memory(url: URL) -> bool:
    """Whether the URL names an in-memory database (no file, no WAL, one shared connection)."""
    if url.database in (None, "", ":memory:"):
        return True
    mode = url.query.get("mode")
    return mode == "memory" or (isinstance(mode, tuple) and "memory" in mode)


class SQLiteBackend(Backend):
    """The embedded backend: one file, WAL, `BEGIN IMMEDIATE` writes, upstream's pragmas."""

    name = "sqlite"
    one_connection = True

    def engine_options(self, url: URL, *, synchronous: str | None) -> dict[str, Any]:
        if synchronous is not None and synchronous.lower() not in SYNCHRONOUS:
            raise InvalidValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS)}")
        connect_args = {"timeout": BUSY_TIMEOUT_SECONDS, "check_same_thread": False}
        if is_memory(url):
            return {"poolclass": StaticPool, "connect_args": connect_args}
        return {"poolclass": NullPool, "connect_args": connect_args}

    def read_only_url(self, url: URL) -> URL:
        if is_memory(url):
            raise InvalidValueError("an in-memory SQLite database cannot be opened read-only")
        if str(url.query.get("uri", "")).lower() in ("true", "1"):
            return url.update_query_dict({"mode": "ro"})
        uri = "file:" + quote(str(Path(str(url.database)).absolute()), safe="/")
        return URL.create(url.drivername, database=uri, query={"mode": "ro", "uri": "true"})

    def install(self, engine: Engine, *, synchronous: str | None) -> None:
        @event.listens_for(engine, "connect")
        def on_connect(dbapi_conn: sqlite3.Connection, record: Any) -> None:
            dbapi_conn.isolation_level = None
            busy_ms = int(BUSY_TIMEOUT_SECONDS * 1000)
            dbapi_conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            # Upstream's bundled SQLite is built with SQLITE_DEFAULT_FOREIGN_KEYS=1: a step
            # whose run does not exist is refused there, so it is here.
            dbapi_conn.execute("PRAGMA foreign_keys = ON")
            # FULL unless told otherwise, as upstream's durability, whatever this SQLite
            # build's compiled-in default for WAL is.
            level = (synchronous or "full").upper()
            dbapi_conn.execute(f"PRAGMA synchronous = {level}")
            if level in ("NORMAL", "OFF"):
                # Checkpoint the WAL every ~40 MB instead of ~4 MB: a checkpoint fsyncs even
                # under NORMAL, and at ~5 frames a commit it came every ~200 checkpoints.
                # Not under FULL, where each commit's fsync would then carry a longer WAL.
                dbapi_conn.execute("PRAGMA wal_autocheckpoint = 10000")

        @event.listens_for(engine, "begin")
        def on_begin(conn: Connection) -> None:
            options = conn.get_execution_options()
            if options.get("isolation_level") == "AUTOCOMMIT":
                return
            dbapi_conn = conn.connection.driver_connection
            assert dbapi_conn is not None
            if conn.info.get(KEEP_ORPHANS):
                dbapi_conn.execute("PRAGMA foreign_keys = OFF")  # only outside a transaction
            write = conn.info.get(WRITE) or options.get(WRITE)
            dbapi_conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def now(self) -> str:
        return "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

    def seconds_since(self, column: str) -> str:
        return f"(julianday('now') - julianday({column})) * 86400.0"

    def finish_clock(self) -> str:
        return (
            "SELECT strftime('%Y-%m-%dT%H:%M:%fZ','now'), "
            "(julianday('now') - julianday(started_at)) * 86400000.0 "
            "FROM runs WHERE id = :run_id"
        )

    def replace(self, table: Table) -> Insert:
        return table.insert().prefix_with("OR REPLACE")

    def upsert_memory(self, table: Table) -> Insert:
        stmt = sqlite_insert(table)
        return stmt.on_conflict_do_update(
            index_elements=["workspace", "key"],
            set_={c: stmt.excluded[c] for c in ("value", "run_id", "step", "created_at")},
        )

    def checkpoint_format(self, conn: Connection) -> int:
        return int(conn.exec_driver_sql("PRAGMA user_version").scalar_one())

    def checkpoint_format_sql(self, version: int) -> list[str]:
        return [f"PRAGMA user_version = {int(version)}"]

    def wal_sql(self) -> list[str]:
        return ["PRAGMA journal_mode = WAL"]

    def switch_to_wal(self, dbapi_connection: Any) -> None:
        """Switch to WAL, waiting out other writers as long as the busy timeout allows.

        The switch needs the database to itself for a moment and SQLite does not call the busy
        handler for it, so a writer committing at that instant would fail the open: retry
        until the busy timeout has passed, then raise `StoreLockedError`.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                for statement in self.wal_sql():
                    dbapi_connection.execute(statement).fetchall()
                return
            except sqlite3.OperationalError as exc:
                typed = self.translate_error(exc)
                if not isinstance(typed, StoreLockedError):
                    raise
                if time.monotonic() >= deadline:
                    raise typed from exc
                time.sleep(0.05)

    def needs_wal_switch(self, conn: Connection) -> bool:
        if is_memory(conn.engine.url):
            return False
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()
        return str(mode).lower() != "wal"

    def shares_memory(self, engine: Engine) -> bool:
        return is_memory(engine.url)

    def translate_error(self, exc: BaseException) -> StoreError | None:
        """From SQLite's (extended) result code, never its message."""
        code = getattr(exc, "sqlite_errorcode", None)
        if not isinstance(code, int):
            return None
        message = str(exc)
        if code == SQLITE_CONSTRAINT_FOREIGNKEY:
            return RunNotFoundError(
                "a step names a run that is not in the store (steps.run_id REFERENCES "
                f"runs(id), enforced as upstream's SQLite does): {message}"
            )
        primary = code & 0xFF
        if primary in (SQLITE_BUSY, SQLITE_LOCKED):
            return StoreLockedError(
                f"the store stayed locked by another writer past the busy timeout "
                f"({BUSY_TIMEOUT_SECONDS:g} s): {message}"
            )
        if primary == SQLITE_READONLY:
            return StoreAccessError(f"the store cannot be written: {message}")
        if primary == SQLITE_CANTOPEN:
            return StoreAccessError(f"cannot open the database file: {message}")
        return None

    def begin_write_sql(self) -> str | None:
        return "BEGIN IMMEDIATE"
