"""Questions, plans, sessions, the mailbox, the queue and process handles on both backends:
answered once, decided once, typed refusals, and the shapes upstream reads."""

from __future__ import annotations

import pytest

from harness_store import (
    HeadConflictError,
    Plan,
    PlanStep,
    PlanVerdict,
    ProcessHandle,
    Question,
    ResumeError,
    Store,
)


def test_a_question_is_answered_once_and_a_missing_one_is_a_typed_error(store: Store) -> None:
    run = store.start_run("g", "f")
    q = store.put_question(run, 2, Question("Which db?", 'two "exist"', ["sqlite", "pg ü"]))
    free = store.put_question(run, 2, Question("Anything else?"))
    assert store.question(free).choices == []  # type: ignore[union-attr]
    assert store.answered_question(run, 2, "Which db?") is None
    assert store.answer_question(q, "pg ü", "alice") is True
    assert store.answer_question(q, "sqlite", "bob") is False
    got = store.answered_question(run, 2, "Which db?")
    assert got is not None and (got.answer, got.answered_by, got.resolved) == (
        "pg ü",
        "alice",
        True,
    )
    assert got.choices == ["sqlite", "pg ü"] and got.context == 'two "exist"'
    with pytest.raises(ResumeError):
        store.answer_question(9999, "x", "y")
    assert [x.id for x in store.questions(run)] == [q, free]


def test_a_plan_is_decided_once_and_the_newest_approval_is_the_plan(store: Store) -> None:
    run = store.start_run("g", "f")
    first = store.put_plan(run, 1, Plan([PlanStep.new("read"), PlanStep.new("port").by("writer")]))
    second = store.put_plan(run, 2, Plan.new([PlanStep("ship")]))
    assert store.approved_plan(run) is None
    assert store.decide_plan(first, PlanVerdict.approve(), "alice") is True
    assert store.decide_plan(first, PlanVerdict.cancel(), "bob") is False
    assert store.decide_plan(second, PlanVerdict.revise("smaller"), "gate") is True
    assert store.approved_plan(run) == Plan([PlanStep("read"), PlanStep("port", "writer")])
    decided = store.plan(second)
    assert decided is not None and decided.verdict == PlanVerdict.revise("smaller")
    with pytest.raises(ResumeError):
        store.decide_plan(9999, PlanVerdict.approve(), "x")
    assert [p.id for p in store.plans(run)] == [first, second]


def test_unresolved_approvals_are_the_ones_still_open(store: Store) -> None:
    run = store.start_run("g", "f")
    a = store.put_pending(run, 1, "exec", "rm -rf target")
    b = store.put_pending(run, 1, "write", "x.txt", "content")
    store.resolve_pending(a, "deny")
    assert [p.id for p in store.unresolved_approvals(run)] == [b]


def test_a_stale_head_move_is_refused_and_changes_nothing(store: Store) -> None:
    session = store.create_session("/ws")
    run = store.start_run("turn", "")
    t1 = store.record_turn(session, None, run, "one")
    store.set_session_head_if(session, None, t1)
    t2 = store.record_turn(session, t1, store.start_run("turn 2", ""), "two")
    with pytest.raises(HeadConflictError):
        store.set_session_head_if(session, None, t2)
    assert store.session_head(session) == t1
    with pytest.raises(HeadConflictError):
        store.set_session_head_if(9999, None, t2)
    store.set_session_head_if(session, t1, t2)
    store.set_session_head(session, None)
    assert store.session_head(session) is None
    store.finish_turn(t2, None, "cancelled")
    turn = store.session_turn(t2)
    assert turn is not None and (turn.parent_turn_id, turn.reply, turn.outcome) == (
        t1,
        None,
        "cancelled",
    )
    assert store.turn_for_run(run) == t1 and store.turn_for_run(9999) is None
    assert store.session_root(session) == "/ws" and store.session_root(9999) is None


def test_messages_are_delivered_once_and_kept_for_the_record(store: Store) -> None:
    root = store.start_run("root", "f")
    child = store.start_child_run("child", "f", root, 1)
    store.send_message(root, child, "root", 1, "first")
    store.send_message(root, child, "other", 1, "second")
    got = store.read_messages(child, "root")
    assert [m.body for m in got] == ["first"] and got[0].read_at is not None
    assert store.read_messages(child, "root") == []
    assert [m.body for m in store.read_messages(child)] == ["second"]
    assert [m.read_at is not None for m in store.messages_for(child)] == [True, True]


def test_handles_end_once_and_live_ones_are_orphaned(store: Store) -> None:
    run = store.start_run("g", "f")
    store.record_handle_started(run, 1, 1, "npm run dev")
    store.record_handle_started(run, 1, 1, "ignored repeat")
    store.record_handle_started(run, 2, 2, "sleep 100")
    store.record_handle_pids(run, 1, [10, 11])
    store.record_handle_output(run, 1, 1, "a")
    store.record_handle_output(run, 1, 1, "")
    store.record_handle_output(run, 2, 1, "b\n")
    store.record_handle_ended(run, 1, "exited", 0, None)
    store.record_handle_ended(run, 1, "killed", -9, "late")  # ended already: kept
    orphaned = store.orphan_live_handles(run, "the run crashed")
    assert orphaned == [ProcessHandle(2, 2, "sleep 100", [], "orphaned", None, "the run crashed")]
    assert store.process_handles(run) == [
        ProcessHandle(1, 1, "npm run dev", [10, 11], "exited", 0, None),
        ProcessHandle(2, 2, "sleep 100", [], "orphaned", None, "the run crashed"),
    ]
    assert store.handle_output(run, 1) == "ab\n" and store.handle_output(run, 2) == ""


def test_the_queue_and_addresses_span_the_tree(store: Store) -> None:
    root = store.start_run("root", "f")
    child = store.start_child_run("child", "f", root, 1)
    store.record_spawn(root, 1, child, "child", "f", "n", None, "[]", "helper")
    assert store.enqueue_agent(root, 1, "a", 1) and store.enqueue_agent(child, 2, "b", 2)
    assert store.queued_agents(root) == [(1, "a"), (2, "b")]
    assert store.queued_agents(child) == [(2, "b")]
    assert store.tree_addresses(root) == [("helper", child), ("root", root)]
    assert store.tree_addresses(child) == [("helper", child), ("root", child)]
    assert store.dequeue_agent(root, 1, "a") and not store.dequeue_agent(root, 1, "a")


def test_the_tree_shows_each_agents_mailbox_and_queue(store: Store) -> None:
    root = store.start_run("root", "f")
    child = store.start_child_run("child", "f", root, 1)
    store.send_message(root, child, "root", 1, "one")
    store.send_message(root, child, "root", 1, "two")
    store.send_message(child, root, "helper", 1, "back")
    store.read_messages(root)
    store.enqueue_agent(child, 2, "grandchild", 2)
    nodes = {n.run_id: n for n in store.tree(root)}
    assert (nodes[root].messages, nodes[root].unread, nodes[root].queued) == (1, 0, 0)
    assert (nodes[child].messages, nodes[child].unread, nodes[child].queued) == (2, 2, 1)
