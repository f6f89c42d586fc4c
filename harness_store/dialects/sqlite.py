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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, LargeBinary, Table, and_, cast, event, func, literal
from sqlalchemy.engine import URL
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool, StaticPool
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert

from ..errors import (
    DamagedStoreError,
    DiskFullError,
    InvalidValueError,
    NotADatabaseError,
    RunNotFoundError,
    StoreAccessError,
    StoreError,
    StoreLockedError,
)
from ..formats import BUSY_TIMEOUT_SECONDS, is_number
from ..sqldefaults import NOW, stamp_now_sql
from .base import (
    KEEP_ORPHANS,
    SPEND_DAY,
    SPEND_MODEL,
    SPEND_WATCHED,
    WRITE_DEADLINE,
    WRITE_TRANSACTION,
    Backend,
)
from .read_only_files import file_uri, install_still_reads, names_uri, still_read_outdated
from .sql_constructs import DrivingJoin
from .sqlite_codes import (
    SQLITE_BUSY,
    SQLITE_CANTOPEN,
    SQLITE_CONSTRAINT_FOREIGNKEY,
    SQLITE_CORRUPT,
    SQLITE_FULL,
    SQLITE_IOERR_SHMSIZE,
    SQLITE_LOCKED,
    SQLITE_NOTADB,
    SQLITE_READONLY,
    error_code,
)
from .sqlite_queue import SQLiteWriteQueue, begin_immediate
from .sqlite_run_tokens import token_backfill_sql, token_triggers_sql
from .sqlite_text import install as install_text_look
from .sqlite_text import texts_not_utf8 as texts_not_utf8_of
from .sqlite_text import tolerant as tolerant_of
from .write_queue import WriteQueue

CLOCK = NOW["sqlite"]
"""SQLite's SQL now, as its date functions take it."""

SYNCHRONOUS = ("off", "normal", "full", "extra")


@compiles(DrivingJoin, "sqlite")
def _cross_join(join: DrivingJoin, compiler: SQLCompiler, **kw: Any) -> str:
    """SQLite keeps the tables of a `CROSS JOIN` in the order written."""
    kw["asfrom"] = True
    left = join.left._compiler_dispatch(compiler, **kw)
    right = join.right._compiler_dispatch(compiler, **kw)
    kw.pop("asfrom")
    assert join.onclause is not None, "a driving join always has its ON clause"
    on = join.onclause._compiler_dispatch(compiler, **kw)
    return f"{left} CROSS JOIN {right} ON {on}"


def is_memory(url: URL) -> bool:
    """Whether the URL names an in-memory database (no file, no WAL, one shared connection)."""
    if url.database in (None, "", ":memory:"):
        return True
    mode = url.query.get("mode")
    return mode == "memory" or (isinstance(mode, tuple) and "memory" in mode)


def check_busy_timeout(seconds: float | None) -> float:
    """The busy timeout in seconds: upstream's 5 s unless given, a finite number ≥ 0."""
    if seconds is None:
        return BUSY_TIMEOUT_SECONDS
    if not is_number(seconds) or not seconds >= 0:
        raise InvalidValueError(f"busy_timeout must be a number of seconds ≥ 0, not {seconds!r}")
    if seconds != seconds or seconds == float("inf"):
        raise InvalidValueError(f"busy_timeout must be finite, not {seconds!r}")
    return float(seconds)


INCREMENTAL_VACUUM = 2
"""`PRAGMA auto_vacuum`'s incremental mode: the file keeps the pointer maps that let
`incremental_vacuum` give free pages back a few at a time (io-harness opens such a file as any)."""


class SQLiteBackend(Backend):
    """The embedded backend: one file, WAL, `BEGIN IMMEDIATE` writes, upstream's pragmas."""

    name = "sqlite"
    one_connection = True

    def engine_options(
        self, url: URL, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> dict[str, Any]:
        if synchronous is not None and synchronous.lower() not in SYNCHRONOUS:
            raise InvalidValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS)}")
        timeout = check_busy_timeout(busy_timeout)
        connect_args = {"timeout": timeout, "check_same_thread": False}
        if is_memory(url):
            return {"poolclass": StaticPool, "connect_args": connect_args}
        return {"poolclass": NullPool, "connect_args": connect_args}

    def read_only_url(self, url: URL) -> URL:
        if is_memory(url):
            raise InvalidValueError("an in-memory SQLite database cannot be opened read-only")
        if names_uri(url):
            return url.update_query_dict({"mode": "ro"})
        uri = file_uri(Path(str(url.database)))
        return URL.create(url.drivername, database=uri, query={"mode": "ro", "uri": "true"})

    def still_read_outdated(self, conn: Connection) -> bool:
        return still_read_outdated(conn)

    def decode_with(self, engine: Engine, text_factory: Callable[[bytes], str]) -> None:
        @event.listens_for(engine, "connect")
        def decoding(dbapi_conn: sqlite3.Connection, record: Any) -> None:
            dbapi_conn.text_factory = text_factory

    def install(
        self, engine: Engine, *, synchronous: str | None, busy_timeout: float | None = None
    ) -> None:
        busy_ms = int(check_busy_timeout(busy_timeout) * 1000)
        install_still_reads(engine)  # a read-only engine reads a still file `immutable=1`
        install_text_look(engine)  # a read failing on text that is not UTF-8 names its row

        @event.listens_for(engine, "connect")
        def on_connect(dbapi_conn: sqlite3.Connection, record: Any) -> None:
            dbapi_conn.isolation_level = None
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
            if not (conn.info.get(WRITE_TRANSACTION) or options.get(WRITE_TRANSACTION)):
                dbapi_conn.execute("BEGIN")
                return
            # The write lock, probed at short intervals (fair against writers in tight
            # loops), within the busy timeout; then the timeout back for the statements.
            deadline = conn.info.pop(WRITE_DEADLINE, None) or time.monotonic() + busy_ms / 1000
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA busy_timeout = 0")
            try:
                begin_immediate(cursor, deadline, busy_ms / 1000)
            finally:
                cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")

    def now(self) -> str:
        return stamp_now_sql("sqlite")

    def seconds_since(self, column: str) -> str:
        return f"(julianday({CLOCK}) - julianday({column})) * 86400.0"

    def finish_clock(self) -> str:
        return (
            f"SELECT {stamp_now_sql('sqlite')}, "
            f"(julianday({CLOCK}) - julianday(started_at)) * 86400000.0 "
            "FROM runs WHERE id = :run_id"
        )

    def replace(self, table: Table) -> Insert:
        return table.insert().prefix_with("OR REPLACE")

    def spend_triggers_sql(self) -> list[str]:
        def bump(row: str) -> str:
            return (
                "INSERT INTO hs_spend_days (day, model, changes) VALUES "
                f"({SPEND_DAY.format(row=row)}, {SPEND_MODEL.format(row=row)}, 1) "
                "ON CONFLICT (day, model) DO UPDATE SET changes = changes + 1; "
                f"INSERT INTO hs_spend_runs (run_id, changes) VALUES ({row}.run_id, 1) "
                "ON CONFLICT (run_id) DO UPDATE SET changes = changes + 1;"
            )

        on = "ON provider_calls FOR EACH ROW BEGIN"
        watched = ", ".join(SPEND_WATCHED)
        return [
            f"CREATE TRIGGER IF NOT EXISTS hs_spend_insert AFTER INSERT {on} {bump('NEW')} END",
            f"CREATE TRIGGER IF NOT EXISTS hs_spend_delete AFTER DELETE {on} {bump('OLD')} END",
            f"CREATE TRIGGER IF NOT EXISTS hs_spend_update AFTER UPDATE OF {watched} {on} "
            f"{bump('OLD')} {bump('NEW')} END",
        ]

    def drop_spend_triggers_sql(self) -> list[str]:
        return [f"DROP TRIGGER IF EXISTS hs_spend_{op}" for op in ("insert", "delete", "update")]

    def run_tokens_triggers_sql(self) -> list[str]:
        return token_triggers_sql("hs_run_tokens", "steps", "tokens", run_insert=True)

    def drop_run_tokens_triggers_sql(self) -> list[str]:
        ops = ("insert", "delete", "update", "run_insert", "run_delete")
        return [f"DROP TRIGGER IF EXISTS hs_run_tokens_{op}" for op in ops]

    def run_tokens_backfill_sql(self) -> str:
        return token_backfill_sql("hs_run_tokens", "steps", "tokens", every_run=True)

    def call_tokens_triggers_sql(self) -> list[str]:
        return token_triggers_sql(
            "hs_run_call_tokens", "provider_calls", "total_tokens", run_insert=False
        )

    def drop_call_tokens_triggers_sql(self) -> list[str]:
        ops = ("insert", "delete", "update", "run_delete")
        return [f"DROP TRIGGER IF EXISTS hs_run_call_tokens_{op}" for op in ops]

    def call_tokens_backfill_sql(self) -> str:
        return token_backfill_sql(
            "hs_run_call_tokens", "provider_calls", "total_tokens", every_run=False
        )

    def checkpoint_format(self, conn: Connection) -> int:
        return int(conn.exec_driver_sql("PRAGMA user_version").scalar_one())

    def checkpoint_format_column(self) -> tuple[str, str | None]:
        return "(SELECT user_version FROM pragma_user_version)", None

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

    def write_queue(self, url: URL, *, busy_timeout: float | None = None) -> WriteQueue:
        timeout = check_busy_timeout(busy_timeout)
        if is_memory(url) or str(url.query.get("mode", "")) == "ro":
            return SQLiteWriteQueue(None, timeout)
        return SQLiteWriteQueue(Path(str(url.database)).absolute(), timeout)

    def shares_memory(self, engine: Engine) -> bool:
        return is_memory(engine.url)

    def translate_error(
        self, exc: BaseException, *, connection_intact: bool = False
    ) -> StoreError | None:
        """From SQLite's (extended) result code, never its message."""
        code = error_code(exc)
        if code is None:
            return None
        message = str(getattr(exc, "orig", None) or exc)  # a SQLAlchemy error: its driver's
        if code == SQLITE_CONSTRAINT_FOREIGNKEY:
            return RunNotFoundError(
                "a step names a run that is not in the store (steps.run_id REFERENCES "
                f"runs(id), enforced as upstream's SQLite does): {message}"
            )
        primary = code & 0xFF
        if primary in (SQLITE_BUSY, SQLITE_LOCKED):
            return StoreLockedError(
                f"the store stayed locked by another writer past the busy timeout: {message}"
            )
        if primary == SQLITE_READONLY:
            return StoreAccessError(f"the store cannot be written: {message}")
        if primary == SQLITE_CANTOPEN:
            return StoreAccessError(f"cannot open the database file: {message}")
        if primary == SQLITE_NOTADB:
            return NotADatabaseError(f"not a SQLite database: {message}")
        if primary == SQLITE_FULL or code == SQLITE_IOERR_SHMSIZE:
            return DiskFullError(f"the disk is full ({message}); the write was rolled back")
        if primary == SQLITE_CORRUPT:
            return DamagedStoreError(
                f"the store's file is damaged ({message}); the read stopped there and nothing "
                "was changed. `harness-store check` names the damage; the sqlite3 shell's "
                "`.recover` saves the rows that are whole into a new file"
            )
        return None

    def foreign_keys_back(self, conn: Connection) -> None:
        conn.exec_driver_sql("PRAGMA foreign_keys = ON")

    def begin_write_sql(self) -> str | None:
        return "BEGIN IMMEDIATE"

    def vacuum(self, dbapi_connection: Any) -> None:
        """A store not yet in incremental auto-vacuum (one io-harness made): switched to it by
        the one `VACUUM` that rewrites the whole file, so every later compact is in slices."""
        dbapi_connection.execute(f"PRAGMA auto_vacuum = {INCREMENTAL_VACUUM}")
        dbapi_connection.execute("VACUUM")

    def vacuums_in_slices(self, dbapi_connection: Any) -> bool:
        mode = dbapi_connection.execute("PRAGMA auto_vacuum").fetchone()[0]
        return int(mode) == INCREMENTAL_VACUUM

    def vacuum_slice(self, dbapi_connection: Any, pages: int) -> int:
        """`PRAGMA incremental_vacuum(pages)`, its own write transaction: moves at most
        `pages` pages from the file's end into free ones and truncates the file by them. Run as
        a script: the driver's `execute` steps it once, which frees one page."""
        dbapi_connection.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
        return int(dbapi_connection.execute("PRAGMA freelist_count").fetchone()[0])

    def before_first_table(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"PRAGMA auto_vacuum = {INCREMENTAL_VACUUM}")

    def footprint(self, conn: Connection) -> tuple[int, int, list[tuple[str, int]]]:
        """Pages in use and on the freelist, and pages per b-tree from `dbstat` (as upstream;
        a SQLite built without it gives no breakdown)."""
        page = int(conn.exec_driver_sql("PRAGMA page_size").scalar() or 0)
        pages = int(conn.exec_driver_sql("PRAGMA page_count").scalar() or 0)
        free = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar() or 0)
        try:
            with conn.begin_nested():
                rows = conn.exec_driver_sql(
                    "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"
                ).all()
        except Exception:
            rows = []
        return page * pages, page * free, [(str(n), max(int(b or 0), 0)) for n, b in rows]

    def integrity_problems(self, conn: Connection) -> list[str]:
        """`PRAGMA integrity_check`'s lines, less its "ok" (every page, b-tree and index)."""
        rows = conn.exec_driver_sql("PRAGMA integrity_check").scalars().all()
        return [str(row) for row in rows if str(row) != "ok"]

    def foreign_key_violations(self, conn: Connection) -> list[tuple[str, int | None, str]]:
        """`PRAGMA foreign_key_check`: the rows a store written with foreign keys off left
        without their parent."""
        rows = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
        return [(str(t), None if r is None else int(r), str(p)) for t, r, p, _ in rows]

    def stored_as(self, column: Any, kind: str) -> Any:
        """SQLite keeps any value in any column (a text `'x'` in an INTEGER one): `typeof`."""
        return func.typeof(column).in_((kind, "null"))

    def text_faults(self, column: Any) -> tuple[Any, Any, Any] | None:
        """SQLite keeps any bytes as text: a NUL is found in the value as bytes (its text
        functions stop at one), a byte outside ASCII by `GLOB` (which reads each as a
        character above 0x7f, valid or not)."""
        is_text = func.typeof(column) == "text"
        raw = cast(column, LargeBinary)
        nul = and_(is_text, func.instr(raw, literal(b"\x00", LargeBinary)) > 0)
        wide = and_(is_text, column.op("GLOB")(literal("*[^\x01-\x7f]*")))
        return nul, wide, raw

    def journal_mode(self, conn: Connection) -> str | None:
        return str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()).lower()

    def database_bytes(self, conn: Connection) -> int:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        return int(pages) * int(conn.exec_driver_sql("PRAGMA page_size").scalar_one())

    def table_columns(self, conn: Connection) -> dict[str, frozenset[str]]:
        """One query over the schema table and `pragma_table_info` (SQLAlchemy's reflection
        asks table by table: most of a read-only open of a store io-harness wrote, which has
        no revision stamp and is known by its shape)."""
        rows = conn.exec_driver_sql(
            "SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
            "WHERE m.type = 'table'"
        )
        found: dict[str, set[str]] = {}
        for table, column in rows:
            found.setdefault(str(table), set()).add(str(column))
        return {name: frozenset(columns) for name, columns in found.items()}

    def index_names(self, conn: Connection, tables: Iterable[str]) -> frozenset[str]:
        wanted = set(tables)
        rows = conn.exec_driver_sql("SELECT tbl_name, name FROM sqlite_master WHERE type = 'index'")
        return frozenset(str(name) for table, name in rows if table in wanted)

    def trigger_names(self, conn: Connection, table: str) -> frozenset[str]:
        rows = conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,)
        ).scalars()
        return frozenset(str(name) for name in rows)

    def altered_triggers(self, conn: Connection, statements: Iterable[str]) -> frozenset[str]:
        # SQLite keeps a trigger's CREATE text as written, but for `IF NOT EXISTS`
        made = "CREATE TRIGGER IF NOT EXISTS "
        expected = {
            s[len(made) :].split(" ", 1)[0]: "CREATE TRIGGER " + s[len(made) :]
            for s in statements
            if s.startswith(made)
        }
        stored = conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
        ).all()
        return frozenset(
            str(name) for name, sql in stored if name in expected and sql != expected[name]
        )

    def is_memory(self, url: URL) -> bool:
        return is_memory(url)

    def texts_not_utf8(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[Any],
        *,
        where: Any = None,
        also: Sequence[Any] = (),
    ) -> Iterator[Any]:
        return texts_not_utf8_of(conn, table, columns, where=where, also=also)

    def tolerant(self, conn: Connection) -> AbstractContextManager[None]:
        return tolerant_of(conn)
