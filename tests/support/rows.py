"""Rows read and written through a Store's own engine, for test setup and checks that look
past the Store's methods (what another io-harness process would have written or left)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, select, update

from harness_store import Store
from harness_store import models as m


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


def provider_call(store: Store, run_id: int, total: int | None) -> None:
    """A provider call of `run_id` with `total_tokens` (None: a call that reported none)."""
    execute(
        store,
        insert(m.ProviderCall).values(
            run_id=run_id, step=0, attempt=1, provider="p", total_tokens=total, latency_ms=5
        ),
    )


def foreign_steps(store: Store, run_id: int, *tokens: int) -> None:
    """Steps 1, 2, … of `run_id` with these `tokens`, written as another io-harness process
    would: past the Store's door, which refuses a run's token total past 2⁶³−1."""
    execute(
        store,
        insert(m.Step).values(
            [
                {"run_id": run_id, "step": n, "decision": "d", "result": "r", "tokens": t}
                for n, t in enumerate(tokens, 1)
            ]
        ),
    )


def make_reply(store: Store, run_id: int) -> None:
    """Make `run_id` a reply turn (0.37's `turn_kind`), as io-harness's session code does."""
    execute(store, update(m.Run).where(m.Run.id == run_id).values(turn_kind="reply"))
