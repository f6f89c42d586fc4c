"""The stores the benchmarks measure and the baselines they measure them against.

- Store builders: chain-built SQLite templates copied per variant (`empty_head`,
  `head_template`, `copy_store`), scratch PostgreSQL databases (`pg_database`), bulk loading by
  `COPY` (`pg_copy`).
- `Backend`: what differs between SQLite and PostgreSQL for a benchmark written once — the raw
  DBAPI connection that is the baseline, its placeholder style, how it opens a transaction.
  `SQLITE` and `POSTGRESQL` are the two values; a benchmark body takes one as an argument.
- The raw baselines written once for both backends: upstream's checkpoint by hand
  (`raw_checkpoint_op`).
- LangGraph's baselines: a checkpoint holding one step (`langgraph_checkpoint`), saved per call
  by `SqliteSaver.put` (`sqlite_saver_op`); the async savers reuse the same checkpoint.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import Config

INSERT_STEP = (
    "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERT_CHECKPOINT = (
    "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (?, ?, 'checkpoint', NULL)"
)
"""Upstream 0.13's two checkpoint statements (the same as the Store's compiled ones)."""

STEP_COLUMNS = "steps (run_id, step, decision, result, prompt, tool_call, tokens)"


# --- SQLite stores -------------------------------------------------------------------------


def empty_head(cfg: Config) -> Path:
    """An empty store built by the Alembic chain (0.1 → … → 0.13 → hs1), closed."""
    path = cfg.work / "head-empty.sqlite3"
    if not path.exists():
        from harness_store import Store

        Store.open(path, backup=False).close()
    return path


def head_template(cfg: Config) -> Path:
    """A store built by the Alembic chain with one run (id 1) to checkpoint into."""
    path = cfg.work / "head-template.sqlite3"
    if not path.exists():
        from harness_store import Store

        with Store.open(copy_store(empty_head(cfg), path), backup=False) as store:
            store.start_run("benchmark run", "src/parser.rs")
    return path


def copy_store(source: Path, destination: Path) -> Path:
    """Copy a closed SQLite store (its WAL was checkpointed and removed at close)."""
    for suffix in ("", "-wal", "-shm"):
        target = Path(str(destination) + suffix)
        if target.exists():
            target.unlink()
    if Path(str(source) + "-wal").exists():
        raise RuntimeError(f"{source} has a -wal file: close every connection first")
    shutil.copyfile(source, destination)
    settle(destination)
    return destination


def settle(path: Path) -> None:
    """Flush a freshly written file to disk, as a store that has sat on disk is. Without it
    the first fsync a benchmark times (a WAL switch, a commit) also writes out the whole copy,
    a cost proportional to the file that no real store pays."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def raw_connect(path: Path, synchronous: str, like: Any = None) -> sqlite3.Connection:
    """A plain `sqlite3` connection set up as the Store sets up its own: no implicit
    transactions, 5 s busy timeout, the given `synchronous` — and, given a Store as `like`,
    that Store's WAL auto-checkpoint interval (whatever the package sets, the baseline gets)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    if like is not None:
        with like.engine.connect() as store_conn:
            frames = int(store_conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())
        conn.execute(f"PRAGMA wal_autocheckpoint = {frames}")
    return conn


SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def store_pragmas(store: Any) -> tuple[str, str]:
    """(synchronous, journal_mode) as a Store's own connections have them."""
    with store.engine.connect() as conn:
        sync = int(conn.exec_driver_sql("PRAGMA synchronous").scalar_one())
        mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one())
    return f"{sync} ({SYNC_NAMES.get(sync, '?')})", mode


# --- PostgreSQL databases ------------------------------------------------------------------


def pg_conninfo(url: Any) -> str:
    """A libpq URI for psycopg from a SQLAlchemy URL (or URL string)."""
    from sqlalchemy.engine import make_url

    u = make_url(url) if isinstance(url, str) else url
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def pg_database(server: str, name: str, template: str | None = None) -> Iterator[Any]:
    """A scratch database on the server at `server`, dropped afterwards; yields its URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    from harness_store.engine import to_url

    base = to_url(server)
    admin = psycopg.connect(pg_conninfo(base), autocommit=True)
    try:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        extra = f' TEMPLATE "{template}"' if template else ""
        admin.execute(f'CREATE DATABASE "{name}"{extra}')
        try:
            yield make_url(base).set(database=name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


def pg_copy(cursor: Any, into: str, rows: Iterable[tuple[Any, ...]]) -> None:
    """`COPY into FROM STDIN` of `rows` on a psycopg cursor (`into`: "table (columns…)")."""
    with cursor.copy(f"COPY {into} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


# --- backends ------------------------------------------------------------------------------


def _sqlite_raw(target: Any, autocommit: bool) -> Any:
    conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def _postgresql_raw(target: Any, autocommit: bool) -> Any:
    import psycopg

    return psycopg.connect(pg_conninfo(target), autocommit=autocommit)


@dataclass(frozen=True)
class Backend:
    """What a benchmark written once needs to know of the backend it runs on."""

    name: str
    """As tables and verdicts name it: "SQLite", "PostgreSQL"."""
    driver: str
    """The raw baseline's driver, as tables name it: "sqlite3", "psycopg"."""
    connect: Callable[[Any, bool], Any]
    """(target, autocommit) → a raw DBAPI connection to the store at `target` (a path or a
    URL). SQLite's never opens a transaction by itself; psycopg's does unless `autocommit`."""
    begin: str | None
    """The statement a raw write transaction starts with (None: the driver starts one)."""
    placeholder: str
    """The DBAPI parameter marker that replaces upstream's `?` / `?N`."""

    @property
    def raw(self) -> str:
        """The raw baseline's label: "raw sqlite3", "raw psycopg"."""
        return f"raw {self.driver}"

    def sql(self, statement: str) -> str:
        """Upstream's statement (`?` or `?N` markers) in this driver's parameter style."""
        if self.placeholder == "?":
            return statement
        return re.sub(r"\?\d*", self.placeholder, statement)


SQLITE = Backend("SQLite", "sqlite3", _sqlite_raw, "BEGIN IMMEDIATE", "?")
POSTGRESQL = Backend("PostgreSQL", "psycopg", _postgresql_raw, None, "%s")


def raw_checkpoint_op(
    backend: Backend, conn: Any, run: int, record_of: Callable[[int], Any]
) -> Callable[[int], None]:
    """Upstream's checkpoint by hand on a raw connection: op(n) opens a transaction, INSERTs
    `record_of(n)`'s step and its checkpoint event, and commits (four statements)."""
    cursor = conn.cursor()
    execute, commit = cursor.execute, conn.commit
    insert_step, insert_checkpoint = backend.sql(INSERT_STEP), backend.sql(INSERT_CHECKPOINT)
    begin = backend.begin

    def op(n: int) -> None:
        r = record_of(n)
        if begin is not None:
            execute(begin)
        execute(insert_step, (run, r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens))
        execute(insert_checkpoint, (run, r.step))
        commit()

    return op


# --- LangGraph -----------------------------------------------------------------------------


def langgraph_checkpoint(r: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A LangGraph checkpoint and its metadata holding exactly the step `r` (a `StepRecord`):
    the smallest checkpoint a saver can write — a real one carries the whole graph state."""
    from langgraph.checkpoint.base import LATEST_VERSION
    from langgraph.checkpoint.base.id import uuid6

    checkpoint = {
        "v": LATEST_VERSION,
        "id": str(uuid6(clock_seq=r.step)),
        "ts": "2025-01-01T00:00:00.000000+00:00",
        "channel_values": {
            "step": r.step,
            "decision": r.decision,
            "result": r.result,
            "prompt": r.prompt,
            "tool_call": r.tool_call,
            "tokens": r.tokens,
        },
        "channel_versions": {"step": r.step},
        "versions_seen": {},
        "updated_channels": ["step"],
    }
    return checkpoint, {"source": "loop", "step": r.step, "parents": {}}


def sqlite_saver_op(
    path: Any, synchronous: str, records: list[Any]
) -> tuple[Callable[[int], None], sqlite3.Connection]:
    """`SqliteSaver.put` on its own file, one checkpoint per record; returns (op, connection)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()  # creates its tables and sets journal_mode=WAL
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    prepared = [langgraph_checkpoint(r) for r in records]
    put = saver.put
    config: list[Any] = [{"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}]

    def op(i: int) -> None:
        checkpoint, metadata = prepared[i]
        config[0] = put(config[0], checkpoint, metadata, {})

    return op, conn


def backends(cfg: Config) -> list[Backend]:
    """The backends this run measures: SQLite, and PostgreSQL when given `--pg`."""
    return [SQLITE, POSTGRESQL] if cfg.pg else [SQLITE]


@contextmanager
def scratch_target(cfg: Config, backend: Backend, name: str) -> Iterator[Any]:
    """Where a new Store on `backend` goes, gone afterwards: a path in the run's scratch
    directory (no file there yet), or a scratch database `hs_bench_<name>` on `--pg`'s server."""
    if backend is SQLITE:
        path = cfg.work / f"{name}.sqlite3"
        remove_store(path)
        try:
            yield path
        finally:
            remove_store(path)
    else:
        if not cfg.pg:
            raise RuntimeError(f"{backend.name} needs --pg URL")
        with pg_database(cfg.pg, f"hs_bench_{name}") as url:
            yield url


def drop_role(server: str, role: str) -> None:
    """Drop the login role `role` of the PostgreSQL server `server` (a URL), if it exists: a
    follower role a benchmark made (roles are the server's, not a database's)."""
    import psycopg

    from harness_store.engine import to_url

    with psycopg.connect(pg_conninfo(to_url(server)), autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{role}"')
