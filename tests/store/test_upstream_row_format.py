"""Rows this Store writes, read back with upstream's own SQL on a connection of our own
(sqlite3 / psycopg): every 0.13 table in upstream's format, and every stamp in upstream's clock
format, in UTC whatever the session's time zone."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support import legacy
from support import upstream_sql as up
from support.policies import LAYERED_POLICY
from support.upstream_sql import STAMP_RE, stamp

import harness_store as hs
from harness_store import StepRecord, Store

BIG = 2**53 + 1


def _write_history(store: Store) -> dict[str, Any]:
    """A run history through every write method; returns the ids to read it back by."""
    a = store.start_run("write out.txt", "out.txt")
    store.set_provider(a, "anthropic")
    store.checkpoint_step(
        a, StepRecord(1, "wrote file", "[wrote out.txt]", "the prompt", '{"content":"x"}', 128)
    )
    store.record(a, StepRecord(2, "retry 1 after error", "rate limited", "p2", "", 7))
    store.checkpoint_step(a, StepRecord(2, "verified", "ok", "", "", BIG))
    store.checkpoint_step(a, StepRecord(3, "done", "", "", "", 0))
    store.record_event(a, hs.PolicyEvent.refusal(1, "read", ".env").with_rule(".env", "builtin"))
    store.record_event(
        a, hs.PolicyEvent.decision(2, "write", "out.txt", "approve", "cli").with_performed("o2")
    )
    store.record_checkpoint_event(hs.CheckpointEvent.resume(a, 2, "resumed after a crash"))
    store.record_checkpoint_event(hs.CheckpointEvent.skipped(a, 1))
    c1 = store.start_child_run("child one", "c1.txt", a, 1)
    gc = store.start_child_run("grandchild", "g.txt", c1, 2)
    store.record_agent_event(hs.AgentEvent.spawn(a, 2, c1, "child one"))
    store.record_agent_event(hs.AgentEvent.budget_draw(c1, 1, 1000, BIG))
    store.record_spawn(a, 2, c1, "child one", "c1.txt", "done", 3, '["src/**","*.lock"]')
    store.record_spawn(c1, 1, gc, "grandchild", "g.txt", "", None, "[]")
    store.checkpoint_step(c1, StepRecord(1, "spawned", "r", "", "", 1000))
    store.checkpoint_step(gc, StepRecord(1, "wrote", "r", "", "", 5))
    store.record_sandbox_event(hs.SandboxEvent.create(a, 1, "linux-bwrap"))
    store.record_sandbox_event(hs.SandboxEvent.exec(a, 1, "linux-bwrap", "rustc a.rs"))
    store.record_sandbox_event(hs.SandboxEvent.gate_phase_failed(a, 3, "criterion-compile"))
    store.record_mcp(a, hs.McpEvent.connected("fs", "stdio").with_millis(12))
    store.record_mcp(a, hs.McpEvent.called("fs", "fs__read", True).at_step(1).with_millis(BIG))
    store.record_mcp(a, hs.McpEvent.called("fs", "fs__write", False).at_step(2))
    store.record_mcp(a, hs.McpEvent.disconnected("fs").at_step(3).with_detail(""))
    store.record_context_event(a, hs.ContextEvent.assembled(1, "carried=3 stubbed=5", 900))
    store.record_context_reported(a, 1, 1234)
    store.record_context_event(a, hs.ContextEvent.reread(2, "a.txt changed"))
    store.memory_put("/ws", "build", "cargo build", a, 1)
    store.memory_put("/ws", "test", "cargo test", a, 2)
    store.record_run_policy(a, LAYERED_POLICY)
    obs = [
        hs.Observation(1 + i // 4, kind, None if kind in ("message", "error") else f"t{i}", f"x{i}")
        for i, kind in enumerate(hs.ObsKind)
    ]
    store.record_observations(a, obs)
    b = store.start_run("needs approval", "b.txt")
    store.checkpoint_step(b, StepRecord(1, "asked", "r", "", "", 3))
    pending = store.put_pending(b, 1, "write", "src/a.rs", "fn a() {}")
    store.finish_run(b, "awaiting_approval")
    store.finish_run(gc, "success")
    store.finish_run(c1, "budget_ceiling_reached")
    store.finish_run(a, "success")
    return {"a": a, "b": b, "c1": c1, "gc": gc, "pending": pending, "obs": obs}


@pytest.mark.slow_on("postgresql")
def test_rows_read_back_with_upstreams_sql(db: Store, db_target: str) -> None:
    ids = _write_history(db)
    a, b, c1, gc = ids["a"], ids["b"], ids["c1"], ids["gc"]
    db.close()
    with up.connect(db_target) as conn:

        def read(name: str, *args: Any) -> list[tuple[Any, ...]]:
            return up.read(conn, name, *args)

        assert read("steps", a) == [
            (1, "wrote file", "[wrote out.txt]", "the prompt", '{"content":"x"}', 128),
            (2, "retry 1 after error", "rate limited", "p2", "", 7),
            (2, "verified", "ok", "", "", BIG),
            (3, "done", "", "", "", 0),
        ]
        assert read("last_step", a) == [(3,)]
        assert read("spent_tokens", a) == [(128 + 7 + BIG,)]
        assert read("provider", a) == [("anthropic",)]
        assert read("events", a) == [
            (1, "refusal", "read", ".env", ".env", "builtin", None, None, None),
            (2, "decision", "write", "out.txt", None, None, "approve", "cli", "o2"),
        ]
        assert read("checkpoint_events", a) == [
            (a, 1, "checkpoint", None),
            (a, 2, "checkpoint", None),
            (a, 3, "checkpoint", None),
            (a, 2, "resume", "resumed after a crash"),
            (a, 1, "skipped", None),
        ]
        assert read("pending", ids["pending"]) == [
            (ids["pending"], b, 1, "write", "src/a.rs", "fn a() {}", None)
        ]
        assert read("children", a) == [(c1,)]
        assert read("parent", gc) == [(c1,)]
        assert read("depth", gc) == [(2,)]
        assert read("agent_events", a) == [(a, 2, "spawn", c1, "child one", None, None)]
        assert read("agent_events", c1) == [(c1, 1, "budget_draw", None, None, 1000, BIG)]
        assert read("find_spawn", a, 2, "child one") == [
            (c1, "child one", "c1.txt", "done", 3, '["src/**","*.lock"]')
        ]
        assert read("find_spawn", c1, 1, "grandchild") == [
            (gc, "grandchild", "g.txt", "", None, "[]")
        ]
        assert read("sandbox_events", a) == [
            (a, 1, "create", "linux-bwrap", None),
            (a, 1, "exec", "linux-bwrap", "rustc a.rs"),
            (a, 3, "gate_phase_failed", None, "criterion-compile"),
        ]
        # booleans are INTEGER 0/1; an empty note is dropped, not stored blank
        assert read("mcp_events", a) == [
            (0, "connected", "fs", None, None, 12, "stdio"),
            (1, "called", "fs", "fs__read", 1, BIG, None),
            (2, "called", "fs", "fs__write", 0, None, None),
            (3, "disconnected", "fs", None, None, None, None),
        ]
        assert read("context_events", a) == [
            (1, "assembled", "carried=3 stubbed=5", 900, 1234),
            (2, "reread", "a.txt changed", None, None),
        ]
        assert read("tree_run_ids", a) == [(a,), (c1,), (gc,)]
        assert read("spent_tokens_tree", a) == [(128 + 7 + BIG + 1000 + 5,)]
        assert read("agent_count_tree", a) == [(3,)]
        assert read("runs")[:4] == [(b,), (gc,), (c1,), (a,)]
        assert read("status", b) == [("paused",)]
        assert read("outcome", b) == [("awaiting_approval",)]
        assert read("status", a) == [("completed",)]
        assert read("check_resumable", a) == [(1,)]

        # run_policies: JSON, exactly the recorded document
        (policy,) = read("run_policy", a)
        import json

        assert json.loads(policy[0]) == LAYERED_POLICY

        # the ledger: kinds as 0.13 names them, in observed order
        assert read("observations", a) == [
            (o.step, o.kind.value, o.target, o.text) for o in ids["obs"]
        ]
        assert {row[1] for row in read("observations", a)} == set(legacy.OBS_KINDS)

        # memory: created_at in upstream's clock format, oldest first
        memory = read("memory_list", "/ws")
        assert [row[:4] for row in memory] == [
            ("build", "cargo build", a, 1),
            ("test", "cargo test", a, 2),
        ]
        assert all(re.match(STAMP_RE, row[4]) for row in memory)
        assert read("memory_get", "/ws", "test")[0][:2] == ("test", "cargo test")

        # run_outcomes exactly as upstream's finish_run writes it
        (started,) = read("started_at", a)[0]
        (row,) = read("run_summary", a)
        assert row[:5] == (a, "success", 1, 3, 128 + 7 + BIG)
        finished = stamp(row[6])
        span_ms = (finished - stamp(started)).total_seconds() * 1000
        assert isinstance(row[5], int)
        assert abs(row[5] - span_ms) <= 2, (row[5], span_ms)
        assert read("run_summary", c1)[0][:5] == (c1, "budget_ceiling_reached", 0, 1, 1000)
        assert read("run_summary", gc)[0][:5] == (gc, "success", 1, 1, 5)
        assert read("run_summary", b) == [], "a paused run has no summary yet"

        if not up.is_postgres(db_target):
            # storage classes as upstream's rusqlite binds them: no REAL, no BLOB
            types = up.execute(
                conn,
                "SELECT typeof(success), typeof(steps), typeof(tokens), typeof(duration_ms), "
                "typeof(finished_at) FROM run_outcomes WHERE run_id = ?",
                (a,),
            )
            assert types == [("integer", "integer", "integer", "integer", "text")]
            assert up.execute(conn, "SELECT DISTINCT typeof(ok) FROM mcp_events") in (
                [("null",), ("integer",)],
                [("integer",), ("null",)],
            )
            assert up.execute(conn, "SELECT DISTINCT typeof(tokens), typeof(step) FROM steps") == [
                ("integer", "integer")
            ]
            assert up.execute(
                conn, "SELECT DISTINCT typeof(started_at), typeof(status) FROM runs"
            ) == [("text", "text")]


def test_started_at_and_every_stamp_use_upstreams_clock_format(
    db: Store, ws: str, db_target: str
) -> None:
    before = datetime.now(UTC).replace(tzinfo=None)
    run = db.start_run("g", "f")
    child = db.start_child_run("c", "f", run, 1)
    db.memory_put(ws, "k", "v", run, 1)
    db.finish_run(run, "success")
    after = datetime.now(UTC).replace(tzinfo=None)
    for r in (run, child):
        (value,) = up.read_at(db_target, "started_at", r)[0]
        assert isinstance(value, str)
        # UTC from the database clock, which agrees with ours to well within a second
        assert before - timedelta(seconds=1) <= stamp(value) <= after + timedelta(seconds=1)
    # the same formats through the Store's own reads
    nodes = db.tree(run)
    assert [n.run_id for n in nodes] == [run, child]
    assert all(re.match(STAMP_RE, n.started_at or "") for n in nodes)
    entry = db.memory_get(ws, "k")
    assert entry is not None and re.match(STAMP_RE, entry.created_at)
    summary = db.run_summary(run)
    assert summary is not None and re.match(STAMP_RE, summary.finished_at)
    assert stamp(summary.finished_at) >= stamp(nodes[0].started_at or "")


def test_postgres_stamps_are_utc_whatever_the_session_time_zone(db: Store, db_target: str) -> None:
    """upstream stamps are UTC (`strftime(..., 'now')`); a server or session configured for
    another zone (here UTC+14) must not move them, nor the durations measured from them."""
    if not up.is_postgres(db_target):
        pytest.skip("SQLite's 'now' is UTC by definition")
    with Store.open(db_target + "?options=-c%20TimeZone%3DPacific/Kiritimati") as store:
        before = datetime.now(UTC).replace(tzinfo=None)
        run = store.start_run("g", "f")
        store.memory_put(f"/tz/{run}", "k", "v", run, 1)
        store.finish_run(run, "success")
        after = datetime.now(UTC).replace(tzinfo=None)
        (started,) = up.read_at(db_target, "started_at", run)[0]
        entry = store.memory_get(f"/tz/{run}", "k")
        summary = store.run_summary(run)
        assert entry is not None and summary is not None
        for value in (started, entry.created_at, summary.finished_at):
            assert before - timedelta(seconds=1) <= stamp(value) <= after + timedelta(seconds=1)
        assert summary.duration_ms is not None and 0 <= summary.duration_ms < 60_000
        assert 0 <= store.elapsed_secs(run) < 60
