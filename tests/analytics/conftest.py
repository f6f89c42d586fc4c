"""Stores for the analytics tests: one written through every Store method, and the real
0.22/0.29 fixtures upgraded, each on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FIXTURE_STORES, copy_fixture
from support.pg_databases import store_location

from harness_store import Store
from harness_store.transfer import copy_store

from .reference import write_everything


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def written(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """A store written through every Store method, on each backend; built once a module, so
    the tests using it only read it."""
    for target in store_location(request.param, tmp_path_factory.mktemp("w") / "runs.sqlite3"):
        with Store.open(target) as store:
            write_everything(store)
            yield store


@pytest.fixture(params=[(f, b) for f in FIXTURE_STORES for b in ("sqlite", "postgresql")],
                ids=lambda p: f"{p[0]}-{p[1]}")  # fmt: skip
def upgraded_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A real io-harness 0.22/0.29 store, upgraded; on PostgreSQL, copied there after."""
    name, backend = request.param
    path = copy_fixture(name, tmp_path)
    Store.open(path).close()  # upgraded in place
    for target in store_location(backend, path):
        if backend == "postgresql":
            copy_store(path, target)
        with Store.open(target) as store:
            yield store
