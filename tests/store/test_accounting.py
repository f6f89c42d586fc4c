"""Token and time accounting on both backends: durable spent tokens and elapsed time, tree
aggregates over a root and its descendants, and sums past 64 bits failing alike."""

from __future__ import annotations

import time

import pytest

from harness_store import (
    StepRecord,
    Store,
)
from harness_store.errors import StoreError


def test_spent_tokens_and_elapsed_are_durable_reads(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.checkpoint_step(run, StepRecord.new(1, "a", "ok").with_trace("p", "t", 30))
    db.checkpoint_step(run, StepRecord.new(2, "a", "ok").with_trace("p", "t", 12))
    assert db.spent_tokens(run) == 42
    time.sleep(0.02)
    elapsed = db.elapsed_secs(run)
    assert 0.015 <= elapsed < 60
    # a run with no steps has spent nothing
    assert db.spent_tokens(db.start_run("g", "f")) == 0


def test_tree_aggregate_reads_span_root_and_descendants(db: Store) -> None:
    root = db.start_run("goal", "root")
    child = db.start_child_run("sub", "root", root, 1)
    grandchild = db.start_child_run("subsub", "root", child, 2)
    outsider = db.start_run("other", "root")
    db.checkpoint_step(root, StepRecord.new(1, "a", "ok").with_trace("p", "t", 10))
    db.checkpoint_step(child, StepRecord.new(1, "a", "ok").with_trace("p", "t", 20))
    db.checkpoint_step(grandchild, StepRecord.new(1, "a", "ok").with_trace("p", "t", 5))
    db.checkpoint_step(outsider, StepRecord.new(1, "a", "ok").with_trace("p", "t", 1000))

    assert db.tree_run_ids(root) == [root, child, grandchild]
    assert db.spent_tokens_tree(root) == 35
    assert db.agent_count_tree(root) == 3
    assert db.tree_run_ids(child) == [child, grandchild]
    assert db.spent_tokens_tree(child) == 25
    assert db.agent_count_tree(child) == 2


def test_token_totals_past_64_bits_fail_alike_on_both_backends(store: Store) -> None:
    """Two steps of 2⁶³−1 tokens overflow SQLite's SUM; PostgreSQL's NUMERIC sum must fail the
    same way instead of returning a total no upstream reader can hold."""
    run = store.start_run("g", "f")
    big = 2**63 - 1
    store.checkpoint_step(run, StepRecord(1, "a", "b", tokens=big))
    assert store.spent_tokens(run) == big
    store.checkpoint_step(run, StepRecord(2, "a", "b", tokens=big))
    with pytest.raises(StoreError, match="overflow"):
        store.spent_tokens(run)
    with pytest.raises(StoreError, match="overflow"):
        store.spent_tokens_tree(run)
