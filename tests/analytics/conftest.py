"""Stores for the analytics tests: one written through every Store method, and the real
0.22/0.29 fixtures upgraded, each on SQLite and PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FIXTURE_STORES, PG_ENV, PG_SKIP, copy_fixture, fresh_pg_database

from harness_store import Store
from harness_store.transfer import copy_store

from .reference import write_everything


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def written(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """A store written through every Store method, on each backend; built once a module, so
    the tests using it only read it."""
    if request.param == "sqlite":
        with Store.open(tmp_path_factory.mktemp("written") / "runs.sqlite3") as store:
            write_everything(store)
            yield store
        return
    server = os.environ.get(PG_ENV)
    if not server:
        pytest.skip(PG_SKIP)
    for url in fresh_pg_database(server):
        with Store.open(url) as store:
            write_everything(store)
            yield store


@pytest.fixture(params=[(f, b) for f in FIXTURE_STORES for b in ("sqlite", "postgresql")],
                ids=lambda p: f"{p[0]}-{p[1]}")  # fmt: skip
def upgraded_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A real io-harness 0.22/0.29 store, upgraded; on PostgreSQL, copied there after."""
    name, backend = request.param
    path = copy_fixture(name, tmp_path)
    Store.open(path).close()  # upgraded in place
    if backend == "sqlite":
        with Store.open(path) as store:
            yield store
        return
    server = os.environ.get(PG_ENV)
    if not server:
        pytest.skip(PG_SKIP)
    for url in fresh_pg_database(server):
        copy_store(path, url)
        with Store.open(url) as store:
            yield store
