"""Fixtures of the store tests: a store shared by a module's tests on each backend, io-harness
0.66's oracle, and a store it filled."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interop.oracles import Oracles, built_oracles
from interop.releases import NEWER_WRITERS
from support.pg_databases import store_location
from support.shared import SHARED

NEWEST = NEWER_WRITERS[-1]


# `store` / `store_target` (tests/conftest.py) give each test a fresh SQLite file or a fresh
# PostgreSQL database; they are used where a test needs an empty store. The tests that do not
# share one database per backend for each module (`db` / `db_target`), and only ever look at the
# runs, ids and workspaces they create themselves. A module-scoped store cannot be built on the
# function-scoped `store_target`, so this is the one other place the two backends are listed.


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A store shared by one module's tests: a SQLite file, or a PostgreSQL database."""
    yield from store_location(request.param, tmp_path_factory.mktemp("shared") / "runs.sqlite3")


@pytest.fixture
def db(db_target: str, store_api: Any) -> Iterator[Any]:
    """An open Store on the shared database of this backend, through each API (`store_api`)."""
    with store_api.open(db_target) as opened:
        yield opened


@pytest.fixture
def ws() -> str:
    """A memory workspace no other test uses."""
    return f"/work/ws-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def oracles() -> Oracles:
    """The built oracles (shared with the interop tests, built once)."""
    return built_oracles(SHARED / "oracle")


@pytest.fixture
def upstream_path(tmp_path: Path, oracles: Oracles) -> Path:
    """A SQLite store io-harness 0.66's own code filled: rows in nearly every table."""
    path = tmp_path / "upstream.sqlite3"
    oracles.run(NEWEST, "write", path)
    return path
