"""Approvals and the run policy on both backends: refusals and decisions as upstream's
ledger records them, pending requests kept across a reopen and listed in order, and a policy
read back exactly as recorded (or an error, never a silent `None`)."""

from __future__ import annotations

import pytest
from support.policies import LAYERED_POLICY, PERMISSIVE_POLICY
from support.upstream_sql import raw

from harness_store import Observation, ObsKind, PolicyEvent, ResumeError, Store


def test_refusals_record_action_target_rule_and_layer(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.record_event(
        run, PolicyEvent.refusal(2, "write", "secrets/key.txt").with_rule("secrets/*", "base")
    )
    events = db.events(run)
    assert len(events) == 1
    e = events[0]
    assert (e.step, e.kind, e.act, e.target) == (2, "refusal", "write", "secrets/key.txt")
    assert e.rule == "secrets/*"
    # attributable to the layer that refused, so a base-layer deny is findable
    assert e.layer == "base"
    assert (e.decision, e.source, e.performed) == (None, None, None)


def test_decisions_record_their_value_source_and_any_altered_target(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.record_event(
        run,
        PolicyEvent.decision(1, "write", "src/a.rs", "approve", "stdin").with_performed(
            "src/sandbox/a.rs"
        ),
    )
    db.record_event(run, PolicyEvent.decision(2, "write", "src/b.rs", "approve", "remembered"))
    events = db.events(run)
    assert len(events) == 2
    assert events[0].kind == "decision"
    assert events[0].decision == "approve"
    assert events[0].target == "src/a.rs"
    assert events[0].performed == "src/sandbox/a.rs"
    assert events[1].source == "remembered"
    assert events[1].performed is None
    # events of another run are not mixed in
    other = db.start_run("goal", "root")
    assert db.events(other) == []


def test_a_pending_approval_survives_the_store_being_reopened(db_target: str) -> None:
    with Store.open(db_target) as store:
        run = store.start_run("goal", "root")
        request_id = store.put_pending(run, 3, "write", "src/a.rs", "fn a() {}")
    # a different Store over the same database: the one that wrote it is gone
    with Store.open(db_target) as store:
        p = store.pending(request_id)
        assert p is not None
        assert (p.id, p.run_id, p.step, p.act, p.target) == (
            request_id,
            run,
            3,
            "write",
            "src/a.rs",
        )
        assert p.content == "fn a() {}"
        assert p.resolved is None
        store.resolve_pending(request_id, "approve")
        p = store.pending(request_id)
        assert p is not None and p.resolved == "approve"
        assert store.pending(request_id + 1000) is None


def test_a_layered_policy_reads_back_exactly_as_it_was_recorded(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.record_run_policy(run, LAYERED_POLICY)
    # equal, not similar: layer order and defaults are the boundary
    assert db.run_policy(run) == LAYERED_POLICY
    assert [layer["name"] for layer in db.run_policy(run)["layers"]] == ["base", "task"]


def test_a_permissive_policy_reads_back_permissive(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.record_run_policy(run, PERMISSIVE_POLICY)
    back = db.run_policy(run)
    assert back is not None, "a row was recorded"
    assert back == PERMISSIVE_POLICY


def test_a_run_with_no_recorded_policy_reads_back_none_not_permissive(db: Store) -> None:
    unrecorded = db.start_run("goal", "root")
    permissive = db.start_run("goal", "root")
    db.record_run_policy(permissive, PERMISSIVE_POLICY)
    assert db.run_policy(unrecorded) is None
    assert db.run_policy(permissive) is not None


def test_re_recording_a_policy_for_the_same_run_replaces_it(db: Store, db_target: str) -> None:
    run = db.start_run("goal", "root")
    db.record_run_policy(run, PERMISSIVE_POLICY)
    db.record_run_policy(run, LAYERED_POLICY)
    assert db.run_policy(run) == LAYERED_POLICY
    assert raw(db_target, "SELECT COUNT(*) FROM run_policies WHERE run_id = ?", run) == [(1,)]


def test_an_unreadable_policy_or_ledger_kind_is_an_error_not_none(
    db: Store, db_target: str
) -> None:
    """upstream: a policy that does not parse and a ledger kind it does not know are
    `Error::Resume`, never `None` or a silently shorter ledger."""
    run = db.start_run("goal", "root")
    raw(db_target, "INSERT INTO run_policies (run_id, policy) VALUES (?, ?)", run, "{not json")
    with pytest.raises(ResumeError):
        db.run_policy(run)
    db.record_observations(run, [Observation(1, ObsKind.READ, "a.txt", "text")])
    raw(
        db_target,
        "INSERT INTO ledger_observations (run_id, step, kind, target, text) VALUES (?, 2, ?, ?, ?)",
        run,
        "teleport",
        None,
        "x",
    )
    with pytest.raises(ResumeError):
        db.observations(run)


def test_pending_for_run_lists_every_request_in_order(store: Store) -> None:
    run = store.start_run("g", "f")
    other = store.start_run("g", "f")
    first = store.put_pending(run, 1, "write", "a.txt", "A")
    store.put_pending(other, 1, "exec", "rm", None)
    second = store.put_pending(run, 2, "exec", "make", None)
    store.resolve_pending(first, "approve")
    listed = store.pending_for_run(run)
    assert [(p.id, p.step, p.resolved) for p in listed] == [
        (first, 1, "approve"),
        (second, 2, None),
    ]
    assert store.pending_for_run(other + 1000) == []
