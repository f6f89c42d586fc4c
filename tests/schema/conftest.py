"""Fixtures of the schema tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from support.app_database import app_engine


@pytest.fixture
def admin(pg_url: str) -> Iterator[Engine]:
    """A plain engine on the test's database (no schema of ours), holding the app's table."""
    yield from app_engine(pg_url)
