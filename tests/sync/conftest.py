"""Fixtures of the sync tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support.pg_roles import made_roles


@pytest.fixture
def new_role(pg_url: str) -> Iterator[Callable[[], str]]:
    """Unique PostgreSQL role names for this test, dropped at its end (`made_roles`)."""
    yield from made_roles(pg_url)
