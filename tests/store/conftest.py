"""Fixtures of the store tests: io-harness 0.66's oracle, and a store it filled."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED
from interop.oracles import Oracles, OracleUnavailable, build, unavailable
from interop.releases import NEWER_WRITERS

NEWEST = NEWER_WRITERS[-1]


@pytest.fixture(scope="session")
def oracles() -> Oracles:
    """The built oracles (shared with the interop tests, built once)."""
    try:
        return Oracles(build(SHARED / "oracle"))
    except OracleUnavailable as exc:
        unavailable(exc)
        raise


@pytest.fixture
def upstream_path(tmp_path: Path, oracles: Oracles) -> Path:
    """A SQLite store io-harness 0.66's own code filled: rows in nearly every table."""
    path = tmp_path / "upstream.sqlite3"
    oracles.run(NEWEST, "write", path)
    return path
