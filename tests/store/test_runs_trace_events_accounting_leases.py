"""io-harness 0.66's run-level API on both backends: runs (`run_root`), the trace (edits and
the patch, snapshots, rewinds, citations, server tool calls, gate attempts, step turns, the
tool-attempt journal), the durable event stream with `follow`, accounting with upstream's price
table, and leases. Real stores, real subprocesses for the cross-process claims; the same
assertions on SQLite and PostgreSQL. `tests/interop/test_api_066.py` checks the same rows
against upstream's own code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update

from harness_store import (
    AssistantTurn,
    Citation,
    Edit,
    GateOutcome,
    LeaseConflictError,
    Price,
    PriceTable,
    PriceTier,
    ProviderCall,
    ResumeError,
    RunEvent,
    ServerToolCall,
    Snapshot,
    StepRecord,
    Store,
    ToolCall,
    ToolRecovery,
    Usage,
)
from harness_store import models as m
from harness_store.errors import InvalidValueError, RunNotFoundError
from harness_store.records.trace import render_hunk

ROOT = Path(__file__).resolve().parents[2]


def count(store: Store, model: Any, **where: Any) -> int:
    statement = select(func.count()).select_from(model)
    for k, v in where.items():
        statement = statement.where(getattr(model, k) == v)
    with store.engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def execute(store: Store, statement: Any) -> None:
    with store.engine.begin() as conn:
        conn.execute(statement)


def child_python(code: str, target: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, target, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


# --- runs ----------------------------------------------------------------------------------


def test_run_root_walks_to_the_top_of_the_tree(store: Store) -> None:
    root = store.start_run("coordinate", "/repo")
    child = store.start_child_run("scout", "/repo", root, 1)
    grandchild = store.start_child_run("deeper", "/repo", child, 2)
    assert store.run_root(grandchild) == root
    assert store.run_root(root) == root
    with pytest.raises(RunNotFoundError):
        store.run_root(grandchild + 100)


# --- edits and the patch ---------------------------------------------------------------------


def test_hunks_are_upstreams_head_and_tail_walk_with_three_lines_of_context() -> None:
    before = "".join(f"l{i}\n" for i in range(1, 11))
    after = before.replace("l5\n", "five\n")
    assert render_hunk(before, after) == (
        "@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+five\n l6\n l7\n l8\n"
    )
    assert render_hunk("same\n", "same\n") is None
    # an insertion into an empty file is anchored at line 0 on the old side
    assert render_hunk("", "new\n") == "@@ -0,0 +1,1 @@\n+new\n"
    # a last line losing its terminator is a change, carried by the marker
    assert render_hunk("a\nb\n", "a\nb") == (
        "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n"
    )
    # CRLF line endings are content: the \r stays on its line
    assert render_hunk("a\r\nb\r\n", "a\r\nc\r\n") == "@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n"


def test_edits_and_the_patch_series(store: Store) -> None:
    run = store.start_run("rename", "src/parse.rs")
    old, new = "fn parse() {}\n", "fn parse(s: &str) {}\n"
    edit = Edit.measure(2, "edit_file", "src/parse.rs", old, new).with_hunk(old, new)
    assert (edit.lines_added, edit.lines_removed) == (1, 1)
    store.record_edit(run, edit)
    store.record_edit(run, Edit(3, "shell", "gen.rs", 4, 0))
    assert store.edits(run) == [edit, Edit(3, "shell", "gen.rs", 4, 0, None)]
    assert store.patch(run) == (
        "--- a/src/parse.rs\n+++ b/src/parse.rs\n@@ -1,1 +1,1 @@\n-fn parse() {}\n"
        "+fn parse(s: &str) {}\n# step 3 shell gen.rs: +4 -0 lines, no hunk stored\n"
    )
    assert store.patch(store.start_run("nothing", "x")) == ""
    with pytest.raises(InvalidValueError):
        store.record_edit(run, Edit(-1, "t", "p", 0, 0))
    assert len(store.edits(run)) == 2


def test_a_huge_hunk_is_not_kept() -> None:
    big = "x" * (1 << 20)
    assert Edit.measure(1, "w", "p", "", big).with_hunk("", big).hunk is None


# --- snapshots and rewinds -------------------------------------------------------------------


def test_the_first_snapshot_of_a_path_wins_and_unknown_states_never_read_absent(
    store: Store,
) -> None:
    run = store.start_run("edit", "a.txt")
    store.record_snapshot(run, Snapshot.text(1, "a.txt", "one\n"))
    store.record_snapshot(run, Snapshot.absent(2, "a.txt"))
    store.record_snapshot(run, Snapshot.absent(2, "new.txt"))
    other = store.start_run("other", "a.txt")
    store.record_snapshot(other, Snapshot.absent(1, "a.txt"))
    assert store.snapshot(run, "a.txt") == Snapshot.text(1, "a.txt", "one\n")
    assert store.snapshot(other, "a.txt") == Snapshot.absent(1, "a.txt")
    assert store.snapshot_paths(run) == ["a.txt", "new.txt"]
    assert store.snapshot(run, "never.txt") is None
    execute(store, update(m.Snapshot).where(m.Snapshot.path == "new.txt").values(state="zstd"))
    found = store.snapshot(run, "new.txt")
    assert found is not None and found.state == "unkept" and "zstd" in (found.before or "")


def test_rewinds_round_trip_and_an_unreadable_list_reads_empty(store: Store) -> None:
    run = store.start_run("tidy", "/repo")
    assert store.rewinds(run) == []
    store.record_rewind(run, ["a.txt"], ["k ✓"], [], [(3, "child goal")], 2)
    store.record_rewind(run, [], [], [], [])
    first, second = store.rewinds(run)
    assert (first.files, first.memory_restored, first.queue_cleared) == (
        ("a.txt",),
        ("k ✓",),
        ("child goal",),
    )
    assert first.undid_step == 2 and second.undid_step is None and second.files == ()
    with store.engine.connect() as conn:
        raw = conn.execute(select(m.Rewind.memory_restored).order_by(m.Rewind.id)).scalar()
    assert raw == '["k ✓"]'  # serde_json's compact form, non-ASCII kept
    execute(store, update(m.Rewind).values(files="not json"))
    assert store.rewinds(run)[0].files == ()


# --- citations and server tool calls ---------------------------------------------------------


def test_citations_are_kept_once_per_url_and_step(store: Store) -> None:
    run = store.start_run("search", "anthropic")
    store.record_citations(run, 1, [Citation("https://a", "A"), Citation("https://a", "dup")])
    store.record_citations(run, 1, [Citation("https://a")])
    store.record_citations(run, 2, [Citation("https://a", None, "quoted")])
    store.record_citations(run, 3, [])
    assert store.citations(run) == [
        Citation("https://a", "A"),
        Citation("https://a", None, "quoted"),
    ]


def test_server_tool_calls_keep_failures(store: Store) -> None:
    run = store.start_run("search", "anthropic")
    calls = [
        ServerToolCall.ok("anthropic", "web_search"),
        ServerToolCall.failed("anthropic", "web_search", "max_uses_exceeded"),
    ]
    store.record_server_tool_calls(run, 1, calls)
    assert store.server_tool_calls(run) == calls
    assert [c.succeeded() for c in store.server_tool_calls(run)] == [True, False]


# --- gate attempts, turns, the journal -------------------------------------------------------


def test_gate_attempts_append_and_an_unknown_outcome_reads_errored(store: Store) -> None:
    run = store.start_run("port", "x")
    assert store.last_gate_attempt(run) is None
    first = store.put_gate_attempt(run, 2, "review", GateOutcome.ERRORED, "HTTP 529")
    second = store.put_gate_attempt(run, 2, "review", "passed", "")
    assert second > first
    assert [a.outcome for a in store.gate_attempts(run)] == [
        GateOutcome.ERRORED,
        GateOutcome.PASSED,
    ]
    last = store.last_gate_attempt(run)
    assert last is not None and last.id == second and not last.outcome.is_retryable()
    with pytest.raises(InvalidValueError):
        store.put_gate_attempt(run, 3, "review", "maybe", "")
    execute(store, update(m.GateAttempt).where(m.GateAttempt.id == first).values(outcome="odd"))
    assert store.gate_attempts(run)[0].outcome is GateOutcome.ERRORED
    assert count(store, m.GateAttempt) == 2


def test_step_turns_replace_per_step_and_a_staged_turn_lands_only_with_its_step(
    store: Store,
) -> None:
    run = store.start_run("turns", "x")
    store.record_step_turn(run, AssistantTurn.new(1, "first", []))
    store.record_step_turn(
        run, AssistantTurn.new(1, "retried", [ToolCall("f", {"b": 1, "a": "é"})])
    )
    with store.engine.connect() as conn:
        calls = conn.execute(select(m.StepTurn.calls)).scalar_one()
    assert calls == '[{"name":"f","arguments":{"a":"é","b":1}}]'  # serde's form
    store.stage_step_turn(run, AssistantTurn.new(3, "staged", []))
    store.checkpoint_step(run, StepRecord.new(2, "other step", "ok"))
    assert [t.step for t in store.step_turns(run)] == [1]
    store.checkpoint_step(run, StepRecord.new(3, "its step", "ok"))
    assert store.step_turns(run) == [
        AssistantTurn.new(1, "retried", [ToolCall("f", {"a": "é", "b": 1})]),
        AssistantTurn.new(3, "staged", []),
    ]
    execute(store, update(m.StepTurn).where(m.StepTurn.step == 3).values(calls="{oops"))
    with pytest.raises(ResumeError):
        store.step_turns(run)


def test_the_tool_attempt_journal(store: Store) -> None:
    run = store.start_run("deploy", "x")
    assert store.open_attempt(run, 1, "read_file", ToolRecovery.REPLAYABLE) is None
    assert count(store, m.ToolAttempt) == 0
    charge = store.open_attempt(run, 1, "charge", "indeterminate")
    deploy = store.open_attempt(run, 2, "deploy", ToolRecovery.INDETERMINATE)
    assert charge is not None and deploy is not None
    assert [a.tool for a in store.open_attempts(run)] == ["charge", "deploy"]
    store.resolve_attempt(charge, "skip")
    store.resolve_attempt(charge, "retry")  # closed once: the first decision stands
    store.close_attempt(deploy)
    assert store.open_attempts(run) == []
    with store.engine.connect() as conn:
        rows = conn.execute(select(m.ToolAttempt.resolution).order_by(m.ToolAttempt.id)).all()
    assert [r[0] for r in rows] == ["skip", None]


# --- the event stream ------------------------------------------------------------------------


def test_events_since_is_exclusive_and_the_cursor_is_global(store: Store) -> None:
    a, b = store.start_run("a", "x"), store.start_run("b", "x")
    assert store.event_cursor() == 0
    first = store.put_event(RunEvent.new(a, 1, "retry", kind="timeout", attempt=1, delay_ms=250))
    other = store.put_event(RunEvent.at_depth(b, 1, 1, "stalled"))
    last = store.put_event(RunEvent.new(a, 2, "stalled"))
    assert store.event_cursor() == last > other > first
    assert [c for c, _ in store.events_since(a, 0, 10)] == [first, last]
    assert store.events_since(a, first, 10) == [(last, RunEvent.new(a, 2, "stalled"))]
    assert store.events_since(a, 0, 1)[0][1].fields == {
        "kind": "timeout",
        "attempt": 1,
        "delay_ms": 250,
    }
    with store.engine.connect() as conn:
        raw = conn.execute(select(m.RunEvent.json).where(m.RunEvent.id == other)).scalar_one()
    assert raw == f'{{"run_id":{b},"step":1,"depth":1,"event":"stalled"}}'
    with pytest.raises(InvalidValueError):
        store.put_event(RunEvent.new(a, 1, "x", run_id=5))


def test_tree_events_since_interleaves_one_tree_and_skips_the_others(store: Store) -> None:
    root = store.start_run("fan out", "x")
    child = store.start_child_run("sub", "x", root, 1)
    grandchild = store.start_child_run("subsub", "x", child, 2)
    stranger = store.start_run("another tree", "x")
    written = [
        store.put_event(RunEvent.new(root, 1, "spawned", child_run_id=child, goal="sub")),
        store.put_event(RunEvent.new(stranger, 1, "stalled")),
        store.put_event(RunEvent.at_depth(grandchild, 1, 2, "stalled")),
        store.put_event(RunEvent.at_depth(child, 1, 1, "stalled")),
        store.put_event(RunEvent.new(root, 2, "stalled")),
    ]
    mine = [c for i, c in enumerate(written) if i != 1]
    tail = store.tree_events_since(root, 0, 100)
    assert [c for c, _ in tail] == mine
    assert [(e.run_id, e.depth) for _, e in tail] == [
        (root, 0),
        (grandchild, 2),
        (child, 1),
        (root, 0),
    ]
    assert tail[0][1].fields == {"child_run_id": child, "goal": "sub"}
    assert [c for c, _ in store.tree_events_since(root, mine[1], 100)] == mine[2:]
    assert [c for c, _ in store.tree_events_since(root, 0, 2)] == mine[:2]
    assert [c for c, _ in store.tree_events_since(child, 0, 100)] == [mine[1], mine[2]]
    assert store.tree_events_since(stranger + 100, 0, 100) == []
    with pytest.raises(InvalidValueError):
        store.tree_events_since(root, 0, -1)


def test_tree_events_since_seeks_its_trees_events_on_sqlite(tmp_path: Path) -> None:
    """Upstream forces the plan with `CROSS JOIN … INDEXED BY` so an observer polling one tree
    never reads every tree's events; ours must get the same plan."""
    with Store.open(tmp_path / "plan.sqlite3") as store:
        for _ in range(40):
            root = store.start_run("tree", "x")
            kid = store.start_child_run("kid", "x", root, 1)
            for step in range(40):
                store.put_event(RunEvent.new(root, step, "stalled"))
                store.put_event(RunEvent.at_depth(kid, step, 1, "stalled"))
        with store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
        with store.engine.connect() as conn:
            plan = explain_tree_events(conn, root)
    assert "run_events_run" in plan and "SCAN run_events" not in plan, plan


def explain_tree_events(conn: Any, root: int) -> str:
    from sqlalchemy.dialects import sqlite

    from harness_store.store.stream import tree_events_query

    statement = tree_events_query(root, 0, 100)
    sql = str(statement.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}").all()
    return " | ".join(str(r[3]) for r in rows)


WRITER = """
import sys, time
from harness_store import RunEvent, Store
with Store.open(sys.argv[1]) as st:
    run = int(sys.argv[2])
    for i in range(int(sys.argv[3])):
        st.put_event(RunEvent.new(run, i, "step", decision=f"d{i}", tool_call="", tokens=i,
                                  changed=True))
        time.sleep(0.02)
"""


def test_follow_tails_events_another_process_writes_and_resumes(
    store: Store, store_target: str
) -> None:
    run = store.start_run("live", "x")
    store.put_event(RunEvent.new(run, 0, "started", goal="g", provider="p"))
    start = store.event_cursor()
    writer = child_python(WRITER, store_target, str(run), "20")
    seen: list[tuple[int, RunEvent]] = []
    began = time.monotonic()
    for cursor, event in store.follow(interval=0.05):  # from now: the backlog is skipped
        seen.append((cursor, event))
        if len(seen) == 10:
            break  # a reader stops whenever it likes; nothing is left open
    assert writer.wait(timeout=60) == 0, writer.stderr.read() if writer.stderr else ""
    assert time.monotonic() - began < 30
    assert [e.fields["decision"] for _, e in seen] == [f"d{i}" for i in range(10)]
    assert seen[0][0] > start
    # resumable: from the last cursor handled, exactly the rest, then the stream idles
    stop = threading.Event()
    rest = []
    for _cursor, event in store.follow(seen[-1][0], run_id=run, interval=0.05, stop=stop):
        rest.append(event.fields["decision"])
        if len(rest) == 10:
            stop.set()
    assert rest == [f"d{i}" for i in range(10, 20)]
    stop.set()
    assert list(store.follow(0, interval=0.05, stop=stop)) == []
    with pytest.raises(InvalidValueError):
        next(store.follow(0, interval=0))


def test_follow_does_not_spin_while_idle(store: Store) -> None:
    stop = threading.Event()
    timer = threading.Timer(0.6, stop.set)
    timer.start()
    calls = 0
    real = store.events_after

    def counting(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args)

    store.events_after = counting  # type: ignore[method-assign]
    assert list(store.follow(interval=0.2, stop=stop)) == []
    assert 2 <= calls <= 5  # one poll per interval, not a busy loop


# --- accounting ------------------------------------------------------------------------------


def test_cost_is_rounded_once_per_call_with_tiers_and_cache() -> None:
    prices = PriceTable.new("2026-07-29").with_(
        "m", Price(input=3_000_000, output=15_000_000, cache_read=300_000)
    )
    usage = Usage(1_000_000, 100_000, 1_100_000, cache_read_tokens=900_000)
    assert prices.cost_micros("m", usage) == 2_070_000
    assert prices.cost_micros("other", usage) is None
    tiered = PriceTable.new("x").with_("lc", Price(input=1_250_000, output=10_000_000))
    tiered = tiered.with_tiers("lc", [PriceTier(200_000, Price(input=2_500_000))])
    assert tiered.cost_micros("lc", Usage(100_000, 0, 100_000)) == 125_000
    assert tiered.cost_micros("lc", Usage(400_000, 0, 400_000)) == 1_000_000
    # a cache larger than the prompt saturates fresh input at zero
    # (only the 20 cached tokens are billed: 20 × 0.3 = 6)
    assert prices.cost_micros("m", Usage(10, 0, 10, cache_read_tokens=20)) == 6


def calls_fixture(store: Store) -> list[int]:
    runs = [store.start_run(f"r{i}", "x") for i in range(11)]
    for i, run in enumerate(runs):
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(1, 1, 2), 5))
        store.record_provider_call(
            run,
            ProviderCall(
                1,
                2,
                "a",
                "lc",
                Usage(
                    300_000 + i,
                    7,
                    9,
                    cache_read_tokens=3,
                    cache_write_tokens=2,
                    server_tool_requests=1,
                ),
                5,
            ),
        )
        store.record_provider_call(run, ProviderCall(2, 1, "a", None, Usage(4, 4, 8), 5))
        store.record_provider_call(run, ProviderCall(2, 2, "a", "m", None, 0, failure="timeout"))
    return runs


PRICES = (
    PriceTable.new("x")
    .with_("m", Price(input=333_333, output=666_667))
    .with_("lc", Price(input=1, per_server_tool_request=40))
    .with_tiers("lc", [PriceTier(300_005, Price(input=2_500_001, cache_write=7))])
)


def test_provider_calls_round_trip(store: Store) -> None:
    run = store.start_run("calls", "x")
    full = ProviderCall(
        1, 2, "anthropic", "m", Usage(2**62, 1, 2**63 - 1, 3, 4, 5, 6), 7, 8, "stop"
    )
    failed = ProviderCall(2, 1, "openai", None, None, 0, None, None, "timeout")
    store.record_provider_call(run, full)
    store.record_provider_call(run, failed)
    assert store.provider_calls(run) == [full, failed]
    assert store.provider_calls(run + 1) == []
    with pytest.raises(InvalidValueError):
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(2**63), 0))
    assert len(store.provider_calls(run)) == 2


def test_spend_groupings_match_upstreams_row_by_row_pricing(store: Store) -> None:
    runs = calls_fixture(store)
    by_model = store.spend_by_model(PRICES)
    assert [s.key for s in by_model] == ["(unknown model)", "lc", "m"]
    unknown, lc, mm = by_model
    assert (unknown.calls, unknown.unpriced_calls, unknown.cost_micros) == (11, 11, 0)
    assert mm.calls == 22 and mm.unpriced_calls == 11 and mm.usage.total_tokens == 22
    expected_lc = sum(
        PRICES.cost_micros("lc", Usage(300_000 + i, 7, 9, 3, 2, 0, 1)) or 0 for i in range(11)
    )
    assert lc.cost_micros == expected_lc and lc.unpriced_calls == 0
    by_run = store.spend_by_run(PRICES)
    assert [s.key for s in by_run] == sorted(str(r) for r in runs)  # text order, as upstream
    by_day = store.spend_by_day(PRICES)
    assert len(by_day) == 1 and by_day[0].calls == 44 and len(by_day[0].key) == 10
    for name, key in (
        ("spend_by_model", lambda r, d, c: c.model or "(unknown model)"),
        ("spend_by_day", lambda r, d, c: d),
        ("spend_by_run", lambda r, d, c: str(r)),
    ):
        assert getattr(store, name)(PRICES) == store._spend_exact(PRICES, key)


def test_spend_beyond_64_bit_sums_is_still_exact(store: Store) -> None:
    run = store.start_run("huge", "x")
    big = 2**62
    for _ in range(3):
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(big, 0, big), 1))
    prices = PriceTable.new("x").with_("m", Price(input=3))
    (spend,) = store.spend_by_model(prices)
    assert spend.usage.prompt_tokens == 3 * big
    assert spend.cost_micros == 3 * ((big * 3 + 500_000) // 1_000_000)


def test_the_roll_ups_over_finished_runs(store: Store) -> None:
    from harness_store import CheckpointEvent, ContextEvent, SandboxEvent

    clean = store.start_run("g", "x")
    store.finish_run(clean, "success")
    retried = store.start_run("g", "x")
    store.record_sandbox_event(SandboxEvent.gate_phase_failed(retried, 2, "test-run"))
    store.record_sandbox_event(SandboxEvent.gate_phase_failed(retried, 4, "test-run"))
    store.record_sandbox_event(SandboxEvent(retried, 5, "gate_phase_failed"))
    store.finish_run(retried, "success")
    store.finish_run(store.start_run("g", "x"), "stalled")
    store.start_run("still running", "x")
    store.record_context_event(clean, ContextEvent.served(1, "b"))
    store.record_context_event(clean, ContextEvent.replan(3, "no progress"))
    store.record_checkpoint_event(CheckpointEvent.resume(clean, 4, "after a crash"))
    assert [(t.key, t.count) for t in store.runs_by_outcome()] == [("stalled", 1), ("success", 2)]
    (day,) = store.runs_by_day()
    assert day.count == 3 and len(day.key) == 10
    first = store.first_try()
    assert (first.runs, first.succeeded, first.first_try) == (3, 2, 1)
    assert [(t.key, t.count) for t in store.gate_failures_by_phase()] == [
        ("(none)", 1),
        ("test-run", 2),
    ]
    r = store.recovery()
    assert (r.fallbacks, r.replans, r.resumes) == (1, 1, 1)


# --- leases ----------------------------------------------------------------------------------


def test_a_lease_is_acquired_renewed_and_released(store: Store, store_target: str) -> None:
    run = store.start_run("port", "x")
    with store.acquire_lease(run, 300) as lease:
        assert lease.generation == 1
        row = store.run_lease(run)
        assert row is not None and row.owner == store.owner() and not row.expired
        assert row.ttl_secs == 300 and row.expires_at > row.renewed_at
        again = store.acquire_lease(run, 300)  # re-acquiring our own keeps the generation
        assert again.generation == 1
        lease.renew()
        with Store.open(store_target) as other:
            assert other.owner() != store.owner()
            with pytest.raises(LeaseConflictError) as refused:
                other.acquire_lease(run, 300)
            assert refused.value.owner == store.owner()
            assert refused.value.expires_at == store.run_lease(run).expires_at  # type: ignore[union-attr]
    assert store.run_lease(run) is None  # released: no row, anyone may acquire


def test_a_taken_over_driver_checkpoints_nothing(store: Store, store_target: str) -> None:
    run = store.start_run("lost", "x")
    store.acquire_lease(run, 0)  # lapsed as soon as written
    row = store.run_lease(run)
    assert row is not None and row.expired
    store.stage_step_turn(run, AssistantTurn.new(1, "never written", []))
    with Store.open(store_target) as other:
        taken = other.acquire_lease(run, 60)
        assert taken.generation == 2
        with pytest.raises(LeaseConflictError) as lost:
            store.checkpoint_step(run, StepRecord.new(1, "stale", "no"))
        assert lost.value.owner == other.owner()
        with pytest.raises(LeaseConflictError):
            store.checkpoint_steps(run, [StepRecord.new(1, "stale", "no")])
        with pytest.raises(LeaseConflictError):
            store.renew_lease(run, 1)
        assert (
            count(store, m.Step, run_id=run),
            count(store, m.CheckpointEvent, run_id=run),
            count(store, m.StepTurn, run_id=run),
        ) == (0, 0, 0)
        other.checkpoint_step(run, StepRecord.new(1, "new owner", "ok"))
        store.release_lease(run, 1)  # no longer ours: a no-op
        assert [s.decision for s in store.steps(run)] == ["new owner"]
        assert other.run_lease(run).generation == 2  # type: ignore[union-attr]


def test_a_dead_owners_lease_is_taken_over_at_once(store: Store) -> None:
    run = store.start_run("crashed", "x")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    owner = f"{gone.stdout.strip()}-1-0"
    execute(store, insert(m.RunLease).values(run_id=run, owner=owner, generation=4, ttl_secs=3600))
    assert store.acquire_lease(run, 60).generation == 5


CONTENDER = """
import json, sys, time
from harness_store import LeaseConflictError, Store
target, run, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with Store.open(target) as st:
    time.sleep(max(start - time.time(), 0))
    try:
        lease = st.acquire_lease(run, 60)
        print(json.dumps({"won": lease.generation, "owner": st.owner()}))
        time.sleep(1.0)  # hold it while the others try
    except LeaseConflictError as exc:
        print(json.dumps({"lost": exc.owner}))
"""


def test_contending_processes_see_exactly_one_winner(store: Store, store_target: str) -> None:
    run = store.start_run("contended", "x")
    start = time.time() + 2.0
    procs = [child_python(CONTENDER, store_target, str(run), str(start)) for _ in range(4)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    winners = [r for r in results if "won" in r]
    assert len(winners) == 1, results
    assert {r["lost"] for r in results if "lost" in r} == {winners[0]["owner"]}


DRIVER = """
import sys, time
from harness_store import LeaseConflictError, StepRecord, Store
target, run = sys.argv[1], int(sys.argv[2])
with Store.open(target) as st:
    lease = st.acquire_lease(run, 0)  # lapsed at once: the other side may take it over any time
    print("ready", flush=True)
    step, deadline = 0, time.time() + 3
    while time.time() < deadline:
        step += 1
        try:
            st.checkpoint_step(run, StepRecord.new(step, f"gen {lease.generation}", "ok"))
        except LeaseConflictError:
            while True:
                try:
                    lease = st.acquire_lease(run, 0)  # take it back, and go on
                    break
                except LeaseConflictError:
                    pass
"""


def test_take_overs_under_a_running_driver_leave_no_late_step(
    store: Store, store_target: str
) -> None:
    """The generation check holds under concurrency: a driver checkpointing in a tight loop in
    another process, and this one taking its run over again and again (each side takes it back),
    never leaves a step of an old generation committed after the take-over that ended it."""
    run = store.start_run("raced", "x")
    driver = child_python(DRIVER, store_target, str(run))
    assert driver.stdout is not None and driver.stdout.readline().strip() == "ready"
    takeovers: list[tuple[int, int]] = []
    deadline = time.time() + 2.5
    while time.time() < deadline:
        try:
            lease = store.acquire_lease(run, 0)
        except LeaseConflictError:
            continue
        with store.engine.connect() as conn:
            seen = conn.execute(select(func.max(m.Step.id))).scalar() or 0
        takeovers.append((lease.generation, seen))
        time.sleep(0.002)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 0, err
    with store.engine.connect() as conn:
        rows = conn.execute(select(m.Step.id, m.Step.decision).where(m.Step.run_id == run)).all()
    assert len(takeovers) > 5 and len(rows) > 20, (len(takeovers), len(rows))
    late = [
        (step_id, decision, generation)
        for generation, seen in takeovers
        for step_id, decision in rows
        if step_id > seen and int(decision.split()[1]) < generation
    ]
    assert late == []
    assert count(store, m.CheckpointEvent, run_id=run) == len(rows)


def test_a_forked_child_is_another_driver(store_target: str) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    with Store.open(store_target) as store:
        run = store.start_run("forked", "x")
        store.acquire_lease(run, 3600)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.close(read)
                try:
                    store.acquire_lease(run, 60)
                    answer = "taken"
                except LeaseConflictError:
                    answer = "refused"  # the parent is alive and holds it
                os.write(write, f"{answer} {store.owner()}".encode())
            finally:
                os._exit(0)
        os.close(write)
        answer, owner = os.read(read, 1000).decode().split()
        os.close(read)
        os.waitpid(pid, 0)
        assert answer == "refused" and owner != store.owner()
        store.checkpoint_step(run, StepRecord.new(1, "parent", "ok"))  # still the parent's
        assert [s.decision for s in store.steps(run)] == ["parent"]
