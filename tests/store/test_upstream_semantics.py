"""The Store's 0.13 methods keep upstream's semantics as of io-harness 0.66.

A store opened here is at head (0.65's shape), so the newest release's rules apply to the
methods 0.13 already had: memory kinds, pins, restore points and recall-ranked eviction (0.30,
0.36, 0.56, 0.57), decide-once approvals (0.33), the plan pause (0.31), reply turns (0.37) and
spawn names (0.60). Each test runs on SQLite and PostgreSQL; the oracle tests in
`test_semantics_oracle.py` check the same rules against upstream's own code.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, insert, select, update
from support.rows import execute, make_reply, provider_call

from harness_store import ResumeError, StepRecord, Store
from harness_store import models as m

WS = "/ws/semantics"


def snapshots(store: Store, workspace: str = WS) -> list[tuple[Any, ...]]:
    s = m.MemorySnapshot
    statement = (
        select(s.run_id, s.key, s.step, s.before, s.kind, s.state)
        .where(s.workspace == workspace)
        .order_by(s.id)
    )
    with store.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(statement)]


def raw_entry(store: Store, key: str, workspace: str = WS) -> tuple[Any, ...]:
    mem = m.Memory
    statement = select(mem.value, mem.kind, mem.pinned).where(
        mem.workspace == workspace, mem.key == key
    )
    with store.engine.connect() as conn:
        return tuple(conn.execute(statement).one())


def put_entry(
    store: Store,
    key: str,
    created_at: str,
    *,
    value: str = "v",
    kind: str | None = "fact",
    pinned: int | None = 0,
    workspace: str = WS,
) -> None:
    """An entry as another writer left it, with the stamp the test needs."""
    execute(
        store,
        insert(m.Memory).values(
            workspace=workspace,
            key=key,
            value=value,
            run_id=1,
            step=1,
            created_at=created_at,
            kind=kind,
            pinned=pinned,
        ),
    )


def recall(store: Store, key: str, run_id: int, at: str, workspace: str = WS) -> None:
    """A recall row as upstream's context assembler writes it (0.30)."""
    execute(
        store,
        insert(m.MemoryRecall).values(run_id=run_id, step=1, workspace=workspace, key=key, at=at),
    )


def count_rows(store: Store, model: type[m.Base]) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(model)).scalar_one())


# --- memory_put: kind, pinned, restore points (0.30, 0.36) ------------------------------------


def test_memory_put_writes_a_fact_that_is_not_pinned(store: Store) -> None:
    run = store.start_run("g", "f")
    store.memory_put(WS, "lang", "rust", run, 1)
    assert raw_entry(store, "lang") == ("rust", "fact", 0)
    entry = store.memory_get(WS, "lang")
    assert entry is not None
    assert (entry.kind, entry.pinned) == ("fact", False)
    assert [(e.key, e.kind, e.pinned) for e in store.memory_list(WS)] == [("lang", "fact", False)]


def test_an_overwrite_makes_a_decision_a_fact_and_leaves_pinned_alone(store: Store) -> None:
    put_entry(store, "db", "2026-01-01T00:00:00.000Z", kind="decision", pinned=None)
    put_entry(store, "old", "2026-01-01T00:00:01.000Z", kind=None, pinned=None)
    before = store.memory_get(WS, "db")
    assert before is not None and (before.kind, before.pinned) == ("decision", False)
    run = store.start_run("g", "f")
    store.memory_put(WS, "db", "postgres", run, 2)
    store.memory_put(WS, "old", "new", run, 2)
    # A pre-0.30 row's NULL pin is not a pin; the overwrite sets the kind and nothing else.
    assert raw_entry(store, "db") == ("postgres", "fact", None)
    assert raw_entry(store, "old") == ("new", "fact", None)


def test_memory_reads_map_kind_and_pinned_as_upstream(store: Store) -> None:
    put_entry(store, "a", "2026-01-01T00:00:00.000Z", kind="decision", pinned=1)
    put_entry(store, "b", "2026-01-01T00:00:01.000Z", kind=None, pinned=None)
    put_entry(store, "c", "2026-01-01T00:00:02.000Z", kind="something newer", pinned=0)
    got = [(e.key, e.kind, e.pinned) for e in store.memory_list(WS)]
    assert got == [("a", "decision", True), ("b", "fact", False), ("c", "fact", False)]
    one = store.memory_get(WS, "a")
    assert one is not None and (one.kind, one.pinned) == ("decision", True)


def test_a_pinned_entry_is_not_overwritten_and_nothing_is_evicted(store: Store) -> None:
    put_entry(store, "pinned", "2026-01-01T00:00:00.000Z", value="by a person", pinned=1)
    for i in range(64):  # one over the entry cap, as another writer may leave it
        put_entry(store, f"e{i:02}", f"2026-01-01T00:01:{i:02}.000Z")
    run = store.start_run("g", "f")
    assert store.memory_put(WS, "pinned", "by the agent", run, 3) == []
    assert raw_entry(store, "pinned") == ("by a person", "fact", 1)
    assert len(store.memory_list(WS)) == 65
    # The refused write leaves no restore point: there is nothing to put back.
    assert snapshots(store) == []


def test_restore_points_are_taken_once_per_run_and_key(store: Store) -> None:
    first, second = store.start_run("g", "f"), store.start_run("g", "f")
    store.memory_put(WS, "k", "v1", first, 1)
    store.memory_put(WS, "k", "v2", first, 2)
    store.memory_put(WS, "k", "v3", second, 5)
    store.memory_put(WS, "k", "v4", second, 6)
    assert snapshots(store) == [
        (first, "k", 1, None, None, "absent"),
        (second, "k", 5, "v2", "fact", "text"),
    ]


def test_a_refusal_keeps_the_restore_point_an_earlier_write_took(store: Store) -> None:
    run, late = store.start_run("g", "f"), store.start_run("g", "f")
    store.memory_put(WS, "k", "mine", run, 1)
    execute(store, update(m.Memory).where(m.Memory.key == "k").values(pinned=1))
    assert store.memory_put(WS, "k", "again", run, 2) == []
    assert store.memory_put(WS, "k", "other", late, 1) == []
    assert snapshots(store) == [(run, "k", 1, None, None, "absent")]
    assert raw_entry(store, "k") == ("mine", "fact", 1)


# --- eviction (0.30 pins, 0.56 recalls) --------------------------------------------------------


@pytest.mark.slow_on("postgresql")
def test_eviction_ranks_by_recall_runs_then_last_recall_then_age_and_skips_pins(
    store: Store,
) -> None:
    value = "x" * 240  # 64 entries of 240 chars: 15,360 of the 16,000-char cap
    put_entry(store, "e_pinned_never", "2026-01-01T00:00:00.000Z", value=value, pinned=1)
    put_entry(store, "a_old_twice", "2026-01-01T00:00:01.000Z", value=value)
    put_entry(store, "b_once_late", "2026-01-01T00:00:02.000Z", value=value)
    put_entry(store, "c_once_early", "2026-01-01T00:00:03.000Z", value=value)
    put_entry(store, "f_never_old", "2026-01-01T00:00:04.000Z", value=value)
    put_entry(store, "d_never_new", "2026-01-01T00:00:05.000Z", value=value)
    strong = [f"r{i:02}" for i in range(58)]
    for i, key in enumerate(strong):
        put_entry(store, key, f"2026-01-01T00:01:{i:02}.000Z", value=value)
        for run in (101, 102, 103):
            recall(store, key, run, "2026-01-03 00:00:00")
    recall(store, "a_old_twice", 101, "2026-01-02 09:00:00")
    recall(store, "a_old_twice", 102, "2026-01-02 10:00:00")
    for at in ("2026-01-02 11:00:00", "2026-01-02 11:30:00", "2026-01-02 12:00:00"):
        recall(store, "b_once_late", 104, at)  # three rows, one run
    recall(store, "c_once_early", 105, "2026-01-02 08:00:00")
    run = store.start_run("g", "f")
    evicted = store.memory_put(WS, "new", "y" * 2000, run, 1)
    # The pinned entry is skipped but still counts, so a sixth entry has to go.
    assert evicted == [
        "f_never_old",
        "d_never_new",
        "c_once_early",
        "b_once_late",
        "a_old_twice",
        "r00",
    ]
    keys = {e.key for e in store.memory_list(WS)}
    assert "e_pinned_never" in keys and "new" in keys and len(keys) == 59
    # An eviction is the store's decision: the recall evidence stays.
    assert count_rows(store, m.MemoryRecall) == 58 * 3 + 2 + 3 + 1


def test_pinned_entries_alone_over_the_caps_evict_nothing(store: Store) -> None:
    for i in range(65):
        put_entry(store, f"p{i:02}", f"2026-01-01T00:00:{i:02}.000Z", pinned=1)
    run = store.start_run("g", "f")
    assert store.memory_put(WS, "new", "v", run, 1) == []
    assert len(store.memory_list(WS)) == 66


def test_eviction_does_not_take_restore_points_away(store: Store) -> None:
    run = store.start_run("g", "f")
    for i in range(65):
        store.memory_put(WS, f"k{i:02}", "v", run, 1)
    assert len(store.memory_list(WS)) == 64
    assert len(snapshots(store)) == 65


# --- memory_list order (0.57) ------------------------------------------------------------------


def test_memory_list_breaks_a_created_at_tie_on_the_key(store: Store) -> None:
    stamp = "2026-01-01T00:00:00.000Z"
    for key in ("b", "c", "a"):  # row ids in this order
        put_entry(store, key, stamp)
    put_entry(store, "0-newer", "2026-01-01T00:00:00.001Z")
    assert [e.key for e in store.memory_list(WS)] == ["a", "b", "c", "0-newer"]


# --- approvals (0.33), plans (0.31) ------------------------------------------------------------


def test_resolve_pending_decides_once_and_says_whether_it_did(store: Store) -> None:
    run = store.start_run("g", "f")
    request = store.put_pending(run, 1, "exec", "rm -rf target")
    assert store.resolve_pending(request, "approve") is True
    assert store.resolve_pending(request, "deny") is False
    found = store.pending(request)
    assert found is not None and found.resolved == "approve"
    assert store.resolve_pending(request + 1000, "approve") is False


def test_finish_run_awaiting_plan_pauses_the_run_without_a_summary(store: Store) -> None:
    run = store.start_run("g", "f")
    store.finish_run(run, "awaiting_plan")
    assert store.status(run) == "paused"
    assert store.outcome(run) == "awaiting_plan"
    assert store.run_summary(run) is None
    store.finish_run(run, "success")
    summary = store.run_summary(run)
    assert store.status(run) == "completed" and summary is not None and summary.success


# --- reply turns (0.37) ------------------------------------------------------------------------


def test_a_reply_turn_spends_its_provider_calls_not_its_steps(store: Store) -> None:
    reply, work = store.start_run("hi", "f"), store.start_run("do", "f")
    for run in (reply, work):
        store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=7))
        provider_call(store, run, 100)
        provider_call(store, run, 23)
        provider_call(store, run, None)
    make_reply(store, reply)
    assert store.spent_tokens(reply) == 123
    assert store.spent_tokens(work) == 7
    store.finish_run(reply, "success")
    summary = store.run_summary(reply)
    assert summary is not None and summary.tokens == 123
    # The tree total still sums steps only, as upstream's does.
    assert store.spent_tokens_tree(reply) == 7


def test_a_reply_without_provider_calls_spent_nothing(store: Store) -> None:
    reply = store.start_run("hi", "f")
    make_reply(store, reply)
    store.checkpoint_step(reply, StepRecord(1, "d", "r", tokens=9))
    assert store.spent_tokens(reply) == 0


def test_a_running_reply_is_not_resumable_but_a_finished_one_is(store: Store) -> None:
    reply, work = store.start_run("hi", "f"), store.start_run("do", "f")
    make_reply(store, reply)
    with pytest.raises(ResumeError) as refused:
        store.check_resumable(reply)
    assert str(refused.value) == (
        f"run {reply} is a conversational turn that was answering when it stopped; it "
        "committed no step, so there is nothing to continue — take the turn again"
    )
    store.check_resumable(work)
    store.finish_run(reply, "success")
    store.check_resumable(reply)


# --- spawns (0.60) ---------------------------------------------------------------------------


def test_record_spawn_takes_the_child_name_last_and_find_spawn_returns_it(store: Store) -> None:
    parent = store.start_run("p", "f")
    named = store.start_child_run("c", "f", parent, 1)
    unnamed = store.start_child_run("d", "f", parent, 1)
    store.record_spawn(parent, 1, named, "c", "v.md", "ok", 5, "[]", "helper")
    store.record_spawn(parent, 2, unnamed, "d", "v.md", "ok", None, "[]")
    found = store.find_spawn(parent, 1, "c")
    assert found is not None and (found.child_run_id, found.as_name) == (named, "helper")
    old_style = store.find_spawn(parent, 2, "d")
    assert old_style is not None and old_style.as_name == ""


# --- checkpoint_step without a lease (0.62 / 0.64: unchanged) ---------------------------------


def test_checkpoint_step_of_a_caller_without_a_lease_is_0_13s(store: Store) -> None:
    run = store.start_run("g", "f")
    # Another process's lease on the run: upstream checks only a lease this handle holds.
    execute(store, insert(m.RunLease).values(run_id=run, owner="1-2-3", generation=4, ttl_secs=60))
    store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=3))
    assert [(s.step, s.tokens) for s in store.steps(run)] == [(1, 3)]
    assert [(e.step, e.kind, e.detail) for e in store.checkpoint_events(run)] == [
        (1, "checkpoint", None)
    ]
    assert count_rows(store, m.StepTurn) == 0
    with store.engine.connect() as conn:
        lease = conn.execute(select(m.RunLease.owner, m.RunLease.generation)).one()
    assert tuple(lease) == ("1-2-3", 4)


# --- the pin guard under concurrent writers (real processes) ---------------------------------


@pytest.mark.slow_on("postgresql")
def test_a_pin_holds_against_writers_in_other_processes(store: Store, store_target: str) -> None:
    """The pin check is part of the write statement, so once a pin commits no writer in any
    process overwrites the entry — not even one whose write was already in flight."""
    from support.processes import Worker

    runs = [store.start_run(f"writer {i}", "f") for i in range(3)]
    store.memory_put(WS, "k", "before the writers", runs[0], 0)
    workers = [Worker.script("pinned_writer.py", store_target, run, WS, "k") for run in runs]
    try:
        for worker in workers:
            worker.wait_line("ready", timeout=60)
            worker.wait_line("3", timeout=60)
        # Pinned as a user pins it: through the Store, in the writers' queue.
        assert store.memory_pin(WS, "k", True)
        at_pin = raw_entry(store, "k")[0]
        seen = [len(worker.numbers()) for worker in workers]
        for worker, count in zip(workers, seen, strict=True):
            worker.wait_line(str(count + 20), timeout=60)
    finally:
        for worker in workers:
            worker.kill()
    assert raw_entry(store, "k") == (at_pin, "fact", 1)
    # Each writer run took exactly one restore point, at its first write; refusals took none.
    taken = sorted((run, key, step) for run, key, step, *_ in snapshots(store))
    assert taken == [(runs[0], "k", 0)] + [(run, "k", 1) for run in runs[1:]]
