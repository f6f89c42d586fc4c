"""What a prune's batches read: each batch decides again from its own trees, read from their
roots by index, so the work done inside each write transaction (where live writers wait) is
bounded by the batch, not by the store. Measured by the database itself: on PostgreSQL the
rows of `runs` the transaction read (`pg_stat_xact_user_tables`), on SQLite the virtual
machine's steps (a progress handler counting every 100), in each write transaction."""

from __future__ import annotations

import pytest
from support.write_work import work_per_write

from harness_store import Store
from harness_store.records import StepRecord

OLD = 24
"""Root runs pruned (each with one child): a few batches of a few trees each."""
BATCH_ROWS = 20
"""About four trees a batch (a tree weighs 2 × its steps + its runs)."""


def fill(store: Store, kept: int) -> None:
    """OLD finished trees of a root and a child, one step each; then `kept` runs still
    running, which no prune takes (their rows are what a batch must not read)."""
    with store.transaction():
        for i in range(OLD):
            root = store.start_run(f"old {i}", "plan.toml")
            child = store.start_child_run(f"old child {i}", "plan.toml", root, 1)
            for run in (root, child):
                store.checkpoint_step(run, StepRecord(1, "decide", "ok", tokens=1))
                store.finish_run(run, "success")
        for i in range(kept):
            store.start_run(f"live {i}", "plan.toml")


def batches_of(target: str, kept: int) -> list[int]:
    with Store.open(target, backup=False) as store:
        fill(store, kept)
        with work_per_write(store, "runs") as work:
            pruned = store.prune_runs(before="9999-01-01", batch_rows=BATCH_ROWS)
        assert pruned.runs == 2 * OLD and len(store.runs()) == kept
    return work


@pytest.mark.slow_on("postgresql")  # at scale: PostgreSQL takes 5x the SQLite half
def test_a_batch_reads_its_own_trees_not_the_store(store_target: str) -> None:
    small = batches_of(store_target, 0)
    big = batches_of(store_target, 3000)
    # The same batches, each doing about the same work with a hundred times the runs beside
    # them (an index is a level deeper: 2× bounds it); reading the runs table whole in each
    # batch would take 60 times the rows.
    assert len(big) == len(small) > 2, (small, big)
    assert max(big) <= 2 * max(small) + 50, (small, big)
