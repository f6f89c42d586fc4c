"""Shared fixtures: real SQLite files in tmp dirs, a real PostgreSQL database per test, and
copies of the real io-harness fixture stores.

PostgreSQL tests run when `HARNESS_STORE_PG_URL` names a server (e.g.
`postgresql+psycopg://postgres@127.0.0.1:5432/test`); each test gets an empty database of its
own on that server (`DatabasePool`). Without the variable they skip, saying how to enable them.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from harness_store import Store

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HARNESS_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures"
PG_ENV = "HARNESS_STORE_PG_URL"
PG_SKIP = (
    f"PostgreSQL tests need a server: set {PG_ENV}=postgresql+psycopg://USER@HOST:PORT/DB "
    "(.ci/run sets it)"
)

FIXTURE_STORES = (
    "io-harness-0.22.0/populated",
    "io-harness-0.22.0/interrupted",
    "io-harness-0.22.0/deferred-approval",
    "io-harness-0.29.0/aggregates",
    "io-harness-0.29.0/interrupted",
)


def copy_fixture(name: str, directory: Path) -> Path:
    """A writable copy of a shared fixture store (the originals must never change)."""
    source = FIXTURES / f"{name}.sqlite3"
    if not source.exists():
        pytest.skip(f"fixture {source} is not available")
    target = directory / (name.replace("/", "-") + ".sqlite3")
    shutil.copyfile(source, target)
    target.chmod(target.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR)
    return target


@pytest.fixture
def fixture_copy(tmp_path: Path) -> object:
    """Factory: `fixture_copy("io-harness-0.22.0/populated")` → path of a writable copy."""
    return lambda name: copy_fixture(name, tmp_path)


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The PostgreSQL server URL from the environment, or skip."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(PG_SKIP)
    return url


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """An empty PostgreSQL database for this test alone (see `DatabasePool`)."""
    yield from fresh_pg_database(pg_server_url)


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


_POOLS: dict[str, DatabasePool] = {}


def fresh_pg_database(server_url: str) -> Iterator[str]:
    """Yield the URL of an empty database on `server_url` for the caller alone; when resumed
    (or closed), give it back to be emptied for the next caller."""
    pool = _POOLS.get(server_url)
    if pool is None:
        pool = _POOLS[server_url] = DatabasePool(server_url)
    name = pool.acquire()
    try:
        yield pool.url(name)
    finally:
        pool.release(name)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per CPU and one more. With one per CPU the CPUs are a third idle
    (the suite waits on fsync, subprocesses and PostgreSQL); the extra worker fills that."""
    return (os.cpu_count() or 1) + 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the pooled PostgreSQL databases of this process."""
    while _POOLS:
        _POOLS.popitem()[1].close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a test's store lives: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "runs.sqlite3")
    else:
        server = os.environ.get(PG_ENV)
        if not server:
            pytest.skip(PG_SKIP)
        yield from fresh_pg_database(server)


@pytest.fixture(params=["Store", "AsyncStore"])
def store_api(request: pytest.FixtureRequest) -> Any:
    """Which API the Store tests drive: `Store` itself, or `AsyncStore` through
    `asyncfacade.BlockingAsyncStore` (the same tests, every call a task on an event loop)."""
    if request.param == "Store":
        return Store
    from support.asyncfacade import BlockingAsyncStore

    return BlockingAsyncStore


@pytest.fixture
def store(store_target: str, store_api: Any, new_store: NewStore) -> Iterator[Store]:
    """An open Store on each backend, through each API (`store_api`), new and empty: a copy
    of one `Store.open` created (`NewStore`)."""
    new_store.place(store_target)
    with store_api.open(store_target) as opened:
        yield opened


class NewStore:
    """A store just created by `Store.open` and closed, built once per test process and
    copied for each test that only needs an empty store to work on.

    Creating a store walks the whole Alembic chain: about a second on SQLite and several on
    PostgreSQL here, paid by hundreds of tests. A copy is the same store: on SQLite the
    closed file itself (a closed WAL store has no side files), on PostgreSQL the
    `pg_dump` of the created database replayed into the test's empty one. Creation itself
    is tested where it is the subject (tests/test_migrations.py, the upgrade tests), through
    `store_target` and `pg_url`, which stay empty.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._sqlite: Path | None = None
        self._dumps: dict[str, str] = {}

    def place(self, target: str) -> None:
        """Put a new store at `target`: a SQLite path that does not exist yet, or the URL of
        an empty PostgreSQL database."""
        if "://" not in target:
            shutil.copyfile(self._sqlite_template(), target)
            return
        dump = self._pg_dump(os.environ[PG_ENV])
        if not dump:
            return  # no usable pg_dump: the test's `Store.open` creates the store itself
        engine = create_engine(target, poolclass=NullPool)
        try:
            raw = engine.raw_connection()
            try:
                with closing(raw.cursor()) as cursor:
                    cursor.execute(dump)
                raw.commit()
            finally:
                raw.close()
        finally:
            engine.dispose()

    def _sqlite_template(self) -> Path:
        if self._sqlite is None:
            path = self.directory / "new.sqlite3"
            Store.open(path).close()
            leftovers = [p.name for p in self.directory.iterdir() if p != path]
            assert not leftovers, f"a closed new store left {leftovers}"
            self._sqlite = path
        return self._sqlite

    def _pg_dump(self, server_url: str) -> str:
        """The SQL of a new store on this server, or "" when `pg_dump` is not installed or
        cannot dump it (older than the server)."""
        dump = self._dumps.get(server_url)
        if dump is None:
            dump = ""
            for url in fresh_pg_database(server_url):
                Store.open(url).close()
                libpq = make_url(url).set(drivername="postgresql")
                try:
                    done = subprocess.run(
                        ["pg_dump", "--no-owner", "--inserts", "-d",
                         libpq.render_as_string(hide_password=False)],
                        capture_output=True, text=True, check=True,
                    )  # fmt: skip
                except (OSError, subprocess.CalledProcessError):
                    continue
                # psql's own lines (pg_dump's `\\restrict` guard) are not SQL
                dump = "\n".join(
                    line for line in done.stdout.splitlines() if not line.startswith("\\")
                )
            self._dumps[server_url] = dump
        return dump


@pytest.fixture(scope="session")
def new_store(tmp_path_factory: pytest.TempPathFactory) -> NewStore:
    """This process's `NewStore`."""
    return NewStore(tmp_path_factory.mktemp("new-store"))


def in_newest_memory_order(
    fixture: str, workspace: str, entries: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A fixture's recorded `memory_list` put in io-harness 0.66's order.

    The fixtures' JSON records what 0.22/0.29 returned: oldest first, a same-stamp tie in id
    order. Since 0.57 upstream breaks that tie on the key, and the Store follows the newest
    release; the stamps come from the original fixture file.
    """
    source = FIXTURES / f"{fixture}.sqlite3"
    # immutable: no -wal/-shm is created beside the original, even by root
    with closing(sqlite3.connect(f"file:{source}?mode=ro&immutable=1", uri=True)) as conn:
        stamps = dict(
            conn.execute("SELECT key, created_at FROM memory WHERE workspace = ?", (workspace,))
        )
    return sorted(entries, key=lambda e: (stamps[e["key"]], e["key"]))
