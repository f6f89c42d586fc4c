"""Empty PostgreSQL databases for tests (`fresh_pg_database`), handed out from a pool per test
process (`DatabasePool`), on the server `$HARNESS_STORE_PG_URL` names."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from .provided import unavailable

PG_ENV = "HARNESS_STORE_PG_URL"
PG_SKIP = (
    f"PostgreSQL tests need a server: set {PG_ENV}=postgresql+psycopg://USER@HOST:PORT/DB "
    "(.ci/run sets it)"
)


RESET_DATABASE = r"""
DO $reset$
DECLARE
    found record;
BEGIN
    FOR found IN SELECT evtname FROM pg_event_trigger LOOP
        EXECUTE 'DROP EVENT TRIGGER ' || quote_ident(found.evtname) || ' CASCADE';
    END LOOP;
    FOR found IN SELECT pubname FROM pg_publication LOOP
        EXECUTE 'DROP PUBLICATION ' || quote_ident(found.pubname);
    END LOOP;
    FOR found IN SELECT nspname FROM pg_namespace
                 WHERE nspname !~ '^pg_' AND nspname <> 'information_schema' LOOP
        EXECUTE 'DROP SCHEMA ' || quote_ident(found.nspname) || ' CASCADE';
    END LOOP;
    PERFORM lo_unlink(oid) FROM pg_largeobject_metadata;
END
$reset$;
CREATE SCHEMA public AUTHORIZATION pg_database_owner;
GRANT USAGE ON SCHEMA public TO PUBLIC;
COMMENT ON SCHEMA public IS 'standard public schema';
"""
"""Empty a database back to what `CREATE DATABASE` gives: every schema but the system ones
dropped with all it holds (tables, sequences, types, functions, extensions), event triggers,
publications and large objects too, and a `public` schema as PostgreSQL 15 creates it."""

LEFTOVERS = r"""
SELECT (SELECT count(*) FROM pg_namespace
        WHERE nspname !~ '^pg_' AND nspname NOT IN ('information_schema', 'public'))
     + (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public')
     + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public')
     + (SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'public')
     + (SELECT count(*) FROM pg_extension WHERE extname <> 'plpgsql')
"""
"""How many objects a reset database still holds beyond an empty one's (0, or it is dropped)."""


class DatabasePool:
    """Empty PostgreSQL databases for one test process, each used by one test at a time.

    `CREATE DATABASE` takes about half a second here and `DROP DATABASE` several (PostgreSQL
    forces a checkpoint of the whole server on every drop), which made up much of the suite's
    PostgreSQL time. So a database a test is done with is emptied instead (`RESET_DATABASE`:
    its sessions ended, its database settings reset, every object dropped, checked empty by
    `LEFTOVERS`) and handed to the next test; one that cannot be emptied is dropped. The
    databases are named for this process (several test sessions and xdist workers share one
    server) and dropped when the session ends.
    """

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.admin = create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        self.prefix = f"hs_test_{uuid.uuid4().hex[:8]}_"
        self.free: list[str] = []
        self.made: set[str] = set()

    def url(self, name: str) -> str:
        return make_url(self.server_url).set(database=name).render_as_string(hide_password=False)

    def acquire(self) -> str:
        """The name of an empty database no other test is using."""
        if self.free:
            return self.free.pop()
        name = f"{self.prefix}{len(self.made)}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        self.made.add(name)
        return name

    def release(self, name: str) -> None:
        """Empty `name` for the next test, or drop it when that fails."""
        try:
            with self.admin.connect() as conn:
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": name},
                )
                conn.execute(text(f'ALTER DATABASE "{name}" RESET ALL'))
            target = create_engine(self.url(name), poolclass=NullPool)
            try:
                with target.begin() as conn:
                    conn.exec_driver_sql(RESET_DATABASE)
                    left = conn.exec_driver_sql(LEFTOVERS).scalar()
            finally:
                target.dispose()
        except SQLAlchemyError:
            left = None
        if left == 0:
            self.free.append(name)
        else:
            self.drop(name)

    def drop(self, name: str) -> None:
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.made.discard(name)

    def close(self) -> None:
        """Drop every database this pool made."""
        for name in sorted(self.made):
            self.drop(name)
        self.free.clear()
        self.admin.dispose()


POOLS: dict[str, DatabasePool] = {}


def fresh_pg_database(server_url: str) -> Iterator[str]:
    """Yield the URL of an empty database on `server_url` for the caller alone; when resumed
    (or closed), give it back to be emptied for the next caller."""
    pool = POOLS.get(server_url)
    if pool is None:
        pool = POOLS[server_url] = DatabasePool(server_url)
    name = pool.acquire()
    try:
        yield pool.url(name)
    finally:
        pool.release(name)


def store_location(backend: str, sqlite_path: Path) -> Iterator[str]:
    """Where a test's store lives on `backend`: `sqlite_path` for "sqlite", else a fresh
    PostgreSQL database (given back when resumed), skipping the test where none is configured."""
    if backend == "sqlite":
        yield str(sqlite_path)
        return
    server = os.environ.get(PG_ENV)
    if not server:
        unavailable(PG_SKIP)
    yield from fresh_pg_database(server)


def close_pools() -> None:
    """Drop every pooled database of this process."""
    while POOLS:
        POOLS.popitem()[1].close()


def terminate_inside_a_read(url: str, table: str, timeout: float = 60.0) -> None:
    """Hold `table` of the database at `url` under an exclusive lock until another session
    waits on it, terminate that session inside its wait, then let go: a connection lost in the
    middle of a statement, at a moment the test chooses."""
    from harness_store.engine import make_engine

    admin = make_engine(url)
    waiting = text(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    try:
        with admin.connect() as conn:
            conn.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            deadline = time.monotonic() + timeout
            while True:
                # pg_stat_activity is read once per transaction: look from a fresh snapshot
                conn.execute(text("SELECT pg_stat_clear_snapshot()"))
                pid = conn.execute(waiting).scalar()
                if pid is not None:
                    break
                assert time.monotonic() < deadline, f"no session waited on {table}"
                time.sleep(0.02)
            assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
            conn.rollback()
    finally:
        admin.dispose()
