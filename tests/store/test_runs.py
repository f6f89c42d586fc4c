"""Runs on both backends: provider, status, outcome and summary as upstream records them, the
run tree across a reopen, `check_resumable`'s refusals, durations, `runs()` and `last_run`."""

from __future__ import annotations

import re

import pytest
from support import upstream_sql as up
from support.upstream_sql import STAMP_RE, raw, set_user_version

from harness_store import (
    CHECKPOINT_FORMAT,
    AgentEvent,
    ResumeError,
    StepRecord,
    Store,
)
from harness_store.errors import RunNotFoundError


def test_the_tree_is_reconstructable_from_a_reopened_store(db_target: str) -> None:
    with Store.open(db_target) as db:
        root = db.start_run("root goal", "ws")
        c1 = db.start_child_run("child 1", "ws", root, 1)
        c2 = db.start_child_run("child 2", "ws", root, 1)
        gc = db.start_child_run("grandchild", "ws", c1, 2)
        db.record_agent_event(AgentEvent.spawn(root, 1, c1, "child 1"))
        db.record_agent_event(AgentEvent.spawn(root, 1, c2, "child 2"))
        db.record_agent_event(AgentEvent.spawn(c1, 1, gc, "grandchild"))
        db.record_agent_event(AgentEvent.spawn_refused(root, 2, "agents"))
        db.record_agent_event(AgentEvent.budget_draw(c1, 1, 30, 70))

    with Store.open(db_target) as db:
        assert db.children(root) == [c1, c2]
        assert db.children(c1) == [gc]
        assert db.children(gc) == []
        assert db.parent(gc) == c1
        assert db.parent(root) is None
        assert db.depth(gc) == 2
        assert db.depth(root) == 0
        root_events = db.agent_events(root)
        assert [e.kind for e in root_events] == ["spawn", "spawn", "spawn_refused"]
        assert [e.child_run_id for e in root_events] == [c1, c2, None]
        assert root_events[2].detail == "agents"
        draws = [e for e in db.agent_events(c1) if e.kind == "budget_draw"]
        assert len(draws) == 1
        assert (draws[0].tokens, draws[0].remaining) == (30, 70)


def test_provider_is_recorded_and_read_back(db: Store) -> None:
    run = db.start_run("g", "f")
    assert db.provider(run) is None
    db.set_provider(run, "anthropic")
    assert db.provider(run) == "anthropic"


def test_check_resumable_refuses_a_newer_format_and_a_missing_run(
    store: Store, store_target: str
) -> None:
    run = store.start_run("goal", "root")
    store.check_resumable(run)
    store.finish_run(run, "success")
    store.check_resumable(run)  # a completed run is resumable (as a no-op)
    with pytest.raises(ResumeError):
        store.check_resumable(9999)

    set_user_version(store_target, CHECKPOINT_FORMAT + 1)
    with pytest.raises(ResumeError):
        store.check_resumable(run)


@pytest.mark.parametrize(
    "outcome",
    ["success", "Success", "success ", "succeeded", "verified", "step_cap_reached", ""],
)
def test_only_the_outcome_success_counts_as_success(db: Store, outcome: str) -> None:
    run = db.start_run("g", "f")
    db.finish_run(run, outcome)
    summary = db.run_summary(run)
    assert summary is not None
    assert summary.outcome == outcome
    assert summary.success is (outcome == "success")
    assert db.status(run) == "completed"


def test_a_summary_counts_max_step_and_sum_tokens_and_is_replaced(
    db: Store, db_target: str
) -> None:
    run = db.start_run("g", "f")
    db.checkpoint_step(run, StepRecord(1, "a", "", "", "", 10))
    db.record(run, StepRecord(2, "retry", "", "", "", 3))
    db.record(run, StepRecord(2, "retry", "", "", "", 4))
    db.checkpoint_step(run, StepRecord(2, "a", "", "", "", 20))
    db.finish_run(run, "awaiting_approval")
    assert db.status(run) == "paused"
    assert db.run_summary(run) is None
    db.checkpoint_step(run, StepRecord(3, "a", "", "", "", 1))
    db.finish_run(run, "stalled")
    db.finish_run(run, "success")  # a resumed, already finished run: the last ending wins
    rows = up.read_at(db_target, "run_summary", run)
    assert len(rows) == 1
    assert rows[0][:5] == (run, "success", 1, 3, 38)
    summary = db.run_summary(run)
    assert summary is not None
    assert (summary.steps, summary.tokens, summary.success) == (3, 38, True)


def test_duration_is_null_for_a_run_without_a_start_stamp(db: Store, db_target: str) -> None:
    run = db.start_run("g", "f")
    raw(db_target, "UPDATE runs SET started_at = NULL WHERE id = ?", run)
    assert db.elapsed_secs(run) == 0.0
    db.finish_run(run, "success")
    (row,) = up.read_at(db_target, "run_summary", run)
    assert row[5] is None
    assert re.match(STAMP_RE, row[6])
    summary = db.run_summary(run)
    assert summary is not None and summary.duration_ms is None


def test_tree_returns_each_node_with_parent_depth_status_outcome_steps_tokens(
    db: Store,
) -> None:
    root = db.start_run("root goal", "ws")
    c1 = db.start_child_run("child 1", "ws", root, 1)
    c2 = db.start_child_run("child 2", "ws", root, 1)
    gc = db.start_child_run("grandchild", "ws", c1, 2)
    outsider = db.start_run("outsider", "ws")
    db.start_child_run("outsider child", "ws", outsider, 1)
    db.checkpoint_step(root, StepRecord(1, "spawn", "", "", "", 10))
    db.record(root, StepRecord(2, "retry", "", "", "", 3))
    db.checkpoint_step(root, StepRecord(2, "spawn", "", "", "", 4))
    db.checkpoint_step(c1, StepRecord(1, "a", "", "", "", 100))
    db.checkpoint_step(c1, StepRecord(3, "a", "", "", "", 200))
    db.checkpoint_step(c2, StepRecord(1, "ask", "", "", "", 7))
    db.checkpoint_step(outsider, StepRecord(9, "x", "", "", "", 999))
    db.finish_run(c1, "success")
    db.finish_run(c2, "awaiting_approval")
    db.set_status(gc, "failed")

    nodes = db.tree(root)
    got = [
        (n.run_id, n.parent_run_id, n.depth, n.goal, n.status, n.outcome, n.steps, n.tokens)
        for n in nodes
    ]
    assert got == [
        (root, None, 0, "root goal", "running", None, 2, 17),
        (c1, root, 1, "child 1", "completed", "success", 3, 300),
        (c2, root, 1, "child 2", "paused", "awaiting_approval", 1, 7),
        (gc, c1, 2, "grandchild", "failed", None, 0, 0),
    ]
    assert all(re.match(STAMP_RE, n.started_at or "") for n in nodes)
    assert sum(n.tokens for n in nodes) == db.spent_tokens_tree(root)
    assert len(nodes) == db.agent_count_tree(root)
    assert [n.run_id for n in db.tree(c1)] == [c1, gc]
    assert db.tree(10_000) == []


def test_runs_last_run_and_outcome(store: Store) -> None:
    assert store.runs() == [] and store.last_run() is None
    a = store.start_run("a", "f")
    b = store.start_run("b", "f")
    c = store.start_child_run("c", "f", a, 1)
    assert store.runs() == [c, b, a]
    assert store.last_run() == c
    assert store.outcome(a) is None
    store.finish_run(a, "escalated")
    assert store.outcome(a) == "escalated"
    assert store.outcome(12345) is None
    assert store.run_status(12345) is None


# --- runs ----------------------------------------------------------------------------------


def test_run_root_walks_to_the_top_of_the_tree(store: Store) -> None:
    root = store.start_run("coordinate", "/repo")
    child = store.start_child_run("scout", "/repo", root, 1)
    grandchild = store.start_child_run("deeper", "/repo", child, 2)
    assert store.run_root(grandchild) == root
    assert store.run_root(root) == root
    with pytest.raises(RunNotFoundError):
        store.run_root(grandchild + 100)
