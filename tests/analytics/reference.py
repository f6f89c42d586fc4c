"""What the analytics tests compare with: a store written through every Store method, and
each stored row converted by hand as upstream reads it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from harness_store import ContextEvent, McpEvent, StepRecord, Store
from harness_store.arrow.schema import Kind, shape_of
from harness_store.formats import U64_MAX
from harness_store.records import ProviderCall, Usage

BIG_U64 = U64_MAX
"""Upstream's largest `u64`: what a wrapped column holds (as -1)."""


def write_everything(store: Store) -> None:
    """Every write method of the Store, through the interop writers' scripts, and the
    largest values upstream's `u64` fields take."""
    from interop.memory_sessions import write_like_the_oracle
    from interop.pywriter import write
    from interop.test_run_api_oracle import write_python

    ids = write(store)
    write_like_the_oracle(store)
    write_python(store)
    root = ids["root"]
    # upstream's own form of a step's tool call: `name:{json arguments}`
    store.checkpoint_step(
        root, StepRecord.new(7, "read a.txt", "ok").with_trace("p", 'read_file:{"path":"a"}', 3)
    )
    store.record_mcp(root, McpEvent(7, "call", "files", "files__read", True, BIG_U64, None))
    store.record_context_event(root, ContextEvent(7, "assembled", None, BIG_U64, 2**63 + 5))
    store.record_provider_call(
        root,
        ProviderCall(7, 1, "anthropic", "m-big", Usage(2**63 - 1, 1, 2**63 - 1), 2**63 - 1),
    )


_FORMS = ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%S")


def expected_value(kind: Kind, stored: Any) -> Any:
    """A stored value as upstream reads it, computed here by hand (the reference)."""
    if stored is None:
        return None
    if kind is Kind.STAMP:
        for form in _FORMS:
            try:
                return datetime.strptime(stored, form).replace(tzinfo=UTC)
            except ValueError:
                pass
        raise AssertionError(f"a stamp in no upstream format: {stored!r}")
    if kind in (Kind.U64, Kind.WRAPPED_U64):
        return int(stored)  # the signed value the store keeps
    if kind is Kind.BOOL:
        return bool(stored)
    return stored


def stored_rows(store: Store, table: str) -> list[dict[str, Any]]:
    """Every row of `table` as the database holds it (an ORM-free read on the Store's
    engine), converted by hand, in key order."""
    shape = shape_of(table)
    statement = select(shape.table).order_by(*(shape.table.c[k] for k in shape.key))
    with store.engine.connect() as conn:
        rows = conn.execute(statement).mappings().all()
    return [{c: expected_value(k, row[c]) for c, k in shape.kinds.items()} for row in rows]
