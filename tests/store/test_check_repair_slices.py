"""What `repair`'s write transactions cost: the spend recount is decided in a read and written
in slices of groups, each its own write transaction, so a live writer waits one slice whatever
the store holds; a repair stopped between slices leaves nothing counted twice, and the next
repair recounts only what is still wrong."""

from __future__ import annotations

import pytest
from support.write_work import work_per_write

from harness_store import StepRecord, Store
from harness_store.records import ProviderCall, Usage
from harness_store.records.health import FindingKind

from .checkkit import PRICES

SLICE = 200
"""Groups a slice of the recount holds (`check.RECOUNT_SLICE`)."""


def lost_counters(target: str, runs: int) -> None:
    """`runs` runs of one provider call each, their spend counters lost."""
    with Store.open(target, backup=False) as store:
        with store.transaction():
            for i in range(runs):
                run = store.start_run(f"call {i}", "plan.toml")
                store.record_provider_call(run, ProviderCall(1, 0, "prov", "m1", Usage(1, 1, 2)))
        with store._write() as conn:
            conn.exec_driver_sql("DELETE FROM hs_spend_runs")


def repaired_work(target: str, more: int, groups: int) -> list[int]:
    """`more` runs added, every counter lost, and the work of each write transaction of the
    repair that recounts the `groups` runs."""
    lost_counters(target, more)
    with Store.open(target, backup=False) as store:
        before = store.check()
        assert before.of(FindingKind.SPEND_COUNTER)
        with work_per_write(store, "provider_calls") as work:
            repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        assert any(f"spend counters of {groups} groups" in d for d in repaired.done)
        assert len(store.spend_by_run(PRICES)) == groups
    return work


@pytest.mark.slow_on("postgresql")  # at scale: PostgreSQL takes 3x the SQLite half
def test_a_repair_recounts_in_slices_whatever_the_calls(store_target: str) -> None:
    small = repaired_work(store_target, SLICE, SLICE)
    big = repaired_work(store_target, 4 * SLICE, 5 * SLICE)  # five times the calls
    assert len(big) > len(small), (small, big)
    assert max(big) <= 2 * max(small) + 50, (small, big)


def wrong_totals(target: str, runs: int) -> None:
    """`runs` runs of one step each, their kept token totals (hs6's) all off by one."""
    with Store.open(target, backup=False) as store:
        with store.transaction():
            for i in range(runs):
                run = store.start_run(f"step {i}", "plan.toml")
                store.checkpoint_step(run, StepRecord.new(1, "act", "ok").with_trace("p", "", 3))
        with store._write() as conn:
            conn.exec_driver_sql("UPDATE hs_run_tokens SET total = total + 1")


def recounted_work(target: str, more: int, runs: int) -> list[int]:
    """`more` runs added, every kept total made wrong, and the work of each write transaction
    of the repair that recounts the `runs` runs."""
    wrong_totals(target, more)
    with Store.open(target, backup=False) as store:
        assert store.check().of(FindingKind.RUN_TOKENS)
        with work_per_write(store, "steps") as work:
            repaired = store.repair()
        assert repaired.after.healthy, repaired.after
        assert f"recounted the token totals of {runs} runs" in repaired.done, repaired.done
    return work


@pytest.mark.slow_on("postgresql")
def test_a_repair_recounts_run_token_totals_in_slices(store_target: str) -> None:
    small = recounted_work(store_target, SLICE, SLICE)
    big = recounted_work(store_target, 4 * SLICE, 5 * SLICE)  # five times the runs
    assert (len(small), len(big)) == (1, 5), (small, big)  # a write transaction a slice
    if not store_target.startswith("postgresql"):
        # PostgreSQL's count is of rows read, and a slice here is a fifth of `steps`, which
        # its planner rightly reads whole rather than through the index: no measure at
        # this size. SQLite's virtual machine steps are.
        assert max(big) <= 2 * max(small) + 50, (small, big)
