"""Shared fixtures: real SQLite files in tmp dirs, a real PostgreSQL database per test, and
copies of the real io-harness fixture stores.

PostgreSQL tests run when `HARNESS_STORE_PG_URL` names a server (e.g.
`postgresql+psycopg://postgres@127.0.0.1:5432/test`); each test gets a fresh database created
from it and dropped afterwards. Without the variable they skip, saying how to enable them.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

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
    """A fresh, empty PostgreSQL database for one test; dropped afterwards."""
    yield from fresh_pg_database(pg_server_url)


def fresh_pg_database(server_url: str) -> Iterator[str]:
    """Create a database named for this test, yield its URL, drop it."""
    name = f"hs_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(server_url).set(database=name)
        yield url.render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


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
def store(store_target: str, store_api: Any) -> Iterator[Store]:
    """An open Store on each backend, through each API (`store_api`)."""
    with store_api.open(store_target) as opened:
        yield opened


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
