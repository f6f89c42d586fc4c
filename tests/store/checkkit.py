"""Stores for the health tests: a healthy populated one, and damage planted as another writer
would leave it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, text

from harness_store import Store
from harness_store.records import PriceTable, ProviderCall, StepRecord, Usage
from harness_store.records.accounting import Price
from harness_store.records.health import CheckReport

PRICES = PriceTable.new("2026-01").with_("m1", Price(input=1_000_000, output=2_000_000))


def populated(target: str) -> tuple[Store, dict[str, int]]:
    """A store at head with a tree of checkpointed runs (with retries), a run written without
    checkpoints, a lease, calls and kept spend: healthy."""
    store = Store.open(target)
    root = store.start_run("root goal", "root.txt")
    child = store.start_child_run("child goal", "child.txt", root, 1)
    for run in (root, child):
        for n in (1, 2, 3):
            if n == 2:  # a retry: upstream records it uncheckpointed under the number it reuses
                store.record(run, StepRecord.new(n, "retry", "error: timeout"))
            store.checkpoint_step(run, StepRecord.new(n, "act", "ok").with_trace("p", "{}", 5))
        store.record_provider_call(
            run, ProviderCall(1, 0, "prov", "m1", Usage(prompt_tokens=10, completion_tokens=4))
        )
    store.acquire_lease(child, 60)
    recorded = store.start_run("written with record alone", "r.txt")  # no checkpoints at all
    for n in (1, 2):
        store.record(recorded, StepRecord.new(n, "act", "ok"))
    store.spend_by_run(PRICES)  # keeps priced answers, so the counters are compared with them
    store.spend_by_day(PRICES)
    return store, {"root": root, "child": child}


def plant(store: Store, *statements: str, foreign_keys_off: bool = False) -> None:
    """Run raw SQL on the store's database as another writer would (its own engine)."""
    engine = create_engine(store.url)
    try:
        with engine.begin() as conn:
            if foreign_keys_off and engine.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def kinds(report: CheckReport) -> list[tuple[str, str, tuple[int | str, ...]]]:
    return sorted((f.kind.value, f.table, f.rows) for f in report.findings)


def lost_lease(run_id: int) -> str:
    """The SQL of a lease of `run_id` (a run that does not exist), with well-formed stamps."""
    stamp = "'2026-01-01T00:00:00.000Z'"
    return (
        "INSERT INTO run_leases (run_id, owner, generation, acquired_at, renewed_at, ttl_secs) "
        f"VALUES ({run_id}, 'pid-1', 1, {stamp}, {stamp}, 60)"
    )


def checked_after(target: str, *statements: str) -> Any:
    """The `check` report of a populated store (`populated`) after `statements` were run on it
    as another writer would (`plant`)."""
    store, _ = populated(target)
    with store:
        plant(store, *statements)
        return store.check()
