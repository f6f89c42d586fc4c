"""Rows read and written through a Store's own engine, for test setup and checks that look
past the Store's methods (what another io-harness process would have written or left)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from harness_store import Store


def count(store: Store, model: Any, **where: Any) -> int:
    """How many rows of `model` match `where` (column = value each)."""
    statement = select(func.count()).select_from(model)
    for k, v in where.items():
        statement = statement.where(getattr(model, k) == v)
    with store.engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def execute(store: Store, statement: Any) -> None:
    """One statement of test setup, committed (what another io-harness process would write)."""
    with store.engine.begin() as conn:
        conn.execute(statement)
