"""Deleting sessions (`delete_session`, `sweep_session`, `sweep_sessions`) on both backends
takes harness_store's per-run spend rows with the runs, as `prune_runs` does: no row of a
deleted run is left in `hs_spend_runs` or `hs_spend_priced_runs`, the spend answers count only
the runs kept, and `check` finds the counters in step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from harness_store import Store
from harness_store.models.spend import PRICED_RUNS, SPEND_RUNS
from harness_store.records import Price, PriceTable, ProviderCall, Usage
from harness_store.records.health import FindingKind

PRICES = PriceTable.new("2026-11-30").with_("m-a", Price(input=1_250_001, output=3_000_007))

DELETIONS: dict[str, Callable[[Store, int], Any]] = {
    "delete_session": lambda store, session: store.delete_session(session),
    "sweep_session": lambda store, session: store.sweep_session(session, "2999-01-01"),
    "sweep_sessions": lambda store, session: store.sweep_sessions("2999-01-01"),
}


def spend_rows(target: str, runs: set[int]) -> dict[str, int]:
    """How many rows of each per-run spend table name one of `runs`."""
    engine = create_engine(target if "://" in target else f"sqlite:///{target}")
    try:
        with engine.connect() as conn:
            return {
                t.name: int(
                    conn.execute(
                        select(func.count()).select_from(t).where(t.c.run_id.in_(runs))
                    ).scalar_one()
                )
                for t in (SPEND_RUNS, PRICED_RUNS)
            }
    finally:
        engine.dispose()


def spent(store: Store, run: int, *, calls: int = 1) -> None:
    for i in range(calls):
        store.record_provider_call(run, ProviderCall(1, i + 1, "p", "m-a", Usage(400, 7, 407), 3))
    store.finish_run(run, "success")


@pytest.mark.parametrize("how", sorted(DELETIONS))
def test_deleting_a_session_takes_its_runs_spend_rows(store_target: str, how: str) -> None:
    with Store.open(store_target, backup=False) as store:
        session = store.create_session("/ws")
        root = store.start_run("goal", "plan.toml")
        child = store.start_child_run("child", "plan.toml", root, 1)
        store.record_turn(session, None, root, "hello")
        spent(store, child, calls=2)
        spent(store, root)
        kept = store.start_run("kept", "plan.toml")
        spent(store, kept, calls=3)
        # The kept answers are written per run, then the session goes.
        assert {s.key for s in store.spend_by_run(PRICES)} == {str(root), str(child), str(kept)}
        gone = {root, child}
        assert spend_rows(store_target, gone) == {SPEND_RUNS.name: 2, PRICED_RUNS.name: 2}

        pruned = DELETIONS[how](store, session)

        assert pruned.sessions == 1 and pruned.runs == 2
        assert spend_rows(store_target, gone) == {SPEND_RUNS.name: 0, PRICED_RUNS.name: 0}
        assert spend_rows(store_target, {kept}) == {SPEND_RUNS.name: 1, PRICED_RUNS.name: 1}
        by_run = store.spend_by_run(PRICES)
        assert [(s.key, s.calls) for s in by_run] == [(str(kept), 3)]
        assert [(s.key, s.calls) for s in store.spend_by_model(PRICES)] == [("m-a", 3)]
        assert store.check().of(FindingKind.SPEND_COUNTER) == ()
        # Nothing of the deleted runs comes back when asked again (the kept answers reused).
        assert store.spend_by_run(PRICES) == by_run
        assert spend_rows(store_target, gone) == {SPEND_RUNS.name: 0, PRICED_RUNS.name: 0}


def test_a_dry_run_leaves_the_spend_rows(store_target: str) -> None:
    with Store.open(store_target, backup=False) as store:
        session = store.create_session("/ws")
        run = store.start_run("goal", "plan.toml")
        store.record_turn(session, None, run, "hello")
        spent(store, run)
        store.spend_by_run(PRICES)
        store.delete_session(session, dry_run=True)
        assert spend_rows(store_target, {run}) == {SPEND_RUNS.name: 1, PRICED_RUNS.name: 1}
