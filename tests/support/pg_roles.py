"""Login roles of a test's own on the PostgreSQL test server (`harness-store roles`): unique
names, dropped at the end with every right they were given (`made_roles`), and SQL run as one
of them (`run_sql`, `refused`). The server trusts 127.0.0.1, so a role logs in without a
password."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

DENIED = "42501"
"""insufficient_privilege: a grant or a row-level security policy refused the statement."""


def as_role(pg_url: str, role: str) -> str:
    """`pg_url` logged in as `role`."""
    return make_url(pg_url).set(username=role, password=None).render_as_string(hide_password=False)


def made_roles(pg_url: str) -> Iterator[Callable[[], str]]:
    """Unique role names for one test; every one is dropped at the end (whatever happened),
    with what it owns and every right it was given in the test's database."""
    made: list[str] = []

    def name() -> str:
        made.append(f"hs_test_{uuid.uuid4().hex[:12]}")
        return made[-1]

    try:
        yield name
    finally:
        engine = create_engine(pg_url, poolclass=NullPool)
        try:
            with engine.begin() as conn:
                for role in made:
                    found = text("SELECT 1 FROM pg_roles WHERE rolname = :r")
                    if conn.execute(found, {"r": role}).first():
                        conn.execute(text(f'DROP OWNED BY "{role}"'))
                        conn.execute(text(f'DROP ROLE "{role}"'))
        finally:
            engine.dispose()


def run_sql(url: str, sql: str, params: dict[str, Any] | None = None) -> Any:
    """`sql` run by the role `url` logs in as, in its own committed transaction: its rows, or
    how many rows it changed."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql), params or {})
            return result.all() if result.returns_rows else result.rowcount
    finally:
        engine.dispose()


def refused(url: str, sql: str, params: dict[str, Any] | None = None) -> str:
    """The SQLSTATE PostgreSQL refuses `sql` with when the role of `url` runs it."""
    with pytest.raises(DBAPIError) as caught:
        run_sql(url, sql, params)
    return str(getattr(caught.value.orig, "sqlstate", ""))
