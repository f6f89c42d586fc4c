"""`harness_store.Store` against io-harness 0.13's behaviour and row formats, on real databases.

Sections follow issue 3:

1. every test of upstream's `state.rs` `mod tests` (0.13), ported with the same intent;
2. rows this Store writes, read back with upstream's own SQL on a connection of our own;
3. (the real fixture stores are in `test_store_fixtures.py`);
4. a process killed inside `checkpoint_step`'s transaction, and `Store.transaction()`;
5. memory caps and eviction at their edges;
6. hostile strings and out-of-range values;
7. old stores: upgraded by default (with a backup), refused unchanged with `upgrade=False`;
8. one Store shared by threads;
9. `canonical_trace`, `iter_steps` paging, `tree()`.

Backend tests run on a SQLite file and on PostgreSQL: those that need an empty store take
conftest's `store` (a fresh file / a fresh database each); the others share one database per
backend (`db`, see the fixtures) and only look at the runs and workspaces they create. Rows are
read back with upstream's SQL (`upstream_sql`) on a plain sqlite3 / psycopg connection.
Expected values come from the inputs and from upstream's documented behaviour, never from
harness_store's own code.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import PG_ENV, PG_SKIP, fresh_pg_database
from support import legacy
from support import upstream_sql as up
from support.upstream_sql import STAMP_RE

from harness_store import (
    CHECKPOINT_FORMAT,
    MEMORY_MAX_CHARS,
    MEMORY_MAX_ENTRIES,
    MEMORY_MAX_ENTRY_CHARS,
    AgentEvent,
    CheckpointEvent,
    ContextEvent,
    McpEvent,
    Observation,
    ObsKind,
    PolicyEvent,
    ResumeError,
    RunStatus,
    SandboxEvent,
    StepRecord,
    Store,
)
from harness_store.errors import InvalidValueError, StoreError, UpgradeRequiredError
from harness_store.releases import HEAD
from harness_store.store.runs import BULK_CHUNK, BULK_CHUNK_CHARS, bulk_chunks, step_values

TRUNCATED = "…[truncated]"
BIG = 2**53 + 1
U32_MAX = 2**32 - 1
I64_MAX = 2**63 - 1


# --- fixtures -------------------------------------------------------------------------------
#
# `store` / `store_target` (conftest) give each test a fresh SQLite file or a fresh PostgreSQL
# database; they are used where a test needs an empty store. Creating and dropping a PostgreSQL
# database costs seconds, so the other tests share one database per backend for this module —
# `db` / `db_target` — and only ever look at the runs, ids and workspaces they create themselves.


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A store shared by this module's tests: a SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("shared") / "runs.sqlite3")
    else:
        server = os.environ.get(PG_ENV)
        if not server:
            pytest.skip(PG_SKIP)
        yield from fresh_pg_database(server)


@pytest.fixture
def db(db_target: str, store_api: Any) -> Any:
    """An open Store on the shared database of this backend, through each API (`store_api`)."""
    with store_api.open(db_target) as opened:
        yield opened


@pytest.fixture
def ws() -> str:
    """A memory workspace no other test uses."""
    return f"/work/ws-{uuid.uuid4().hex[:10]}"


# --- helpers --------------------------------------------------------------------------------


def raw(target: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """One statement on a connection of our own (sqlite3 / psycopg), autocommitted."""
    with up.connect(target) as conn:
        return up.execute(conn, sql, args)


def counts(target: str) -> dict[str, int]:
    """Row counts of every 0.13 table, read without harness_store."""
    with up.connect(target) as conn:
        return {t: up.execute(conn, f"SELECT COUNT(*) FROM {t}")[0][0] for t in up.TABLES_0_13}


def stamp(value: str) -> datetime:
    assert re.match(STAMP_RE, value), value
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def keys(entries: list[Any]) -> list[str]:
    return [e.key for e in entries]


def set_user_version(target: str, version: int) -> None:
    """Stamp the checkpoint format as a newer binary would (PostgreSQL: the marker table)."""
    if up.is_postgres(target):
        raw(target, "UPDATE harness_user_version SET user_version = ?", version)
    else:
        raw(target, f"PRAGMA user_version = {int(version)}")


def new_sqlite(path: Path, release: str, *statements: str) -> None:
    """A store with `release`'s shape as upstream's open leaves it, plus rows inserted raw."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        legacy.open_as(conn, release, file=True)
        for sql in statements:
            conn.execute(sql)


# =============================================================================================
# 1. upstream 0.13 `mod tests`, ported
# =============================================================================================


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


def test_a_pre_0_4_database_migrates_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.3", "INSERT INTO runs (goal, file) VALUES ('old goal', 'old.txt')")
    with Store.open(path) as db:
        assert db.last_step(1) == 0
        db.record_event(1, PolicyEvent.refusal(1, "read", ".env"))
        assert len(db.events(1)) == 1
    assert up.read_at(str(path), "events", 1) == [
        (1, "refusal", "read", ".env", None, None, None, None, None)
    ]
    assert raw(str(path), "SELECT goal, file FROM runs") == [("old goal", "old.txt")]


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


def test_a_pre_0_5_database_migrates_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.4", "INSERT INTO runs (goal, file) VALUES ('old', 'old.txt')")
    with Store.open(path) as db:
        assert db.parent(1) is None
        assert db.depth(1) == 0
        child = db.start_child_run("c", "ws", 1, 1)
        assert db.children(1) == [child]
    assert up.read_at(str(path), "children", 1) == [(child,)]


def _write_0_7_rows(path: Path) -> None:
    """What upstream's test writes through a 0.7 Store: a run, a checkpointed step, a refusal."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        legacy.open_as(conn, "0.7", file=True)
        conn.execute(
            "INSERT INTO runs (goal, file, status, started_at) "
            "VALUES ('old goal', 'old.txt', 'running', strftime('%Y-%m-%dT%H:%M:%fZ','now'))"
        )
        conn.execute("BEGIN")
        conn.execute(up.INSERT_STEP, (1, 1, "wrote", "ok", "", "", 0))
        conn.execute(up.INSERT_CHECKPOINT, (1, 1))
        conn.execute("COMMIT")
        conn.execute(
            "INSERT INTO policy_events (run_id, step, kind, act, target) "
            "VALUES (1, 1, 'refusal', 'write', 'secrets/k')"
        )


def test_a_pre_0_8_database_migrates_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _write_0_7_rows(path)
    with closing(sqlite3.connect(path)) as conn:
        before = legacy.read_answers(conn, "0.7", [1])
        assert "mcp_events" not in legacy.user_tables(conn)

    with Store.open(path) as db:
        assert db.last_step(1) == 1
        assert len(db.events(1)) == 1
        assert db.mcp_events(1) == []
        db.record_mcp(1, McpEvent.connected("files", "stdio"))
        events = db.mcp_events(1)
        assert len(events) == 1
        assert events[0].detail == "stdio"
        assert len(db.steps(1)) == 1
        assert db.run_status(1) is RunStatus.RUNNING

    # and a 0.7 binary's own reads answer exactly as before
    with closing(sqlite3.connect(path)) as conn:
        assert legacy.read_answers(conn, "0.7", [1]) == before


def test_full_trace_persists_and_reads_back(db: Store) -> None:
    run = db.start_run("goal", "out.txt")
    db.record(
        run,
        StepRecord.new(1, "wrote file", "content v1").with_trace(
            "the prompt", '{"content":"content v1"}', 128
        ),
    )
    db.record(run, StepRecord.new(2, "verified", "ok"))
    db.finish_run(run, "success")

    steps = db.steps(run)
    assert steps == [
        StepRecord(1, "wrote file", "content v1", "the prompt", '{"content":"content v1"}', 128),
        StepRecord(2, "verified", "ok", "", "", 0),
    ]
    assert db.last_step(run) == 2
    # `record` writes no checkpoint event (only `checkpoint_step` does)
    assert db.checkpoint_events(run) == []


def test_migrates_a_0_1_0_steps_table_in_place(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(
        path,
        "0.1",
        "INSERT INTO runs (goal, file) VALUES ('g', 'f')",
        "INSERT INTO steps (run_id, step, decision, result) VALUES (1, 1, 'wrote file', 'old')",
    )
    with Store.open(path) as db:
        assert db.steps(1) == [StepRecord(1, "wrote file", "old", "", "", 0)]


def test_provider_is_recorded_and_read_back(db: Store) -> None:
    run = db.start_run("g", "f")
    assert db.provider(run) is None
    db.set_provider(run, "anthropic")
    assert db.provider(run) == "anthropic"


def test_migrates_a_pre_0_3_runs_table_adding_provider(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.2", "INSERT INTO runs (goal, file) VALUES ('g', 'f')")
    with Store.open(path) as db:
        assert db.provider(1) is None
        db.set_provider(1, "openai")
        assert db.provider(1) == "openai"
    assert up.read_at(str(path), "provider", 1) == [("openai",)]


def test_checkpoint_step_commits_the_step_and_its_event_together(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.checkpoint_step(run, StepRecord.new(1, "act", "ok"))
    db.checkpoint_step(run, StepRecord.new(2, "act", "ok"))
    assert db.last_step(run) == 2
    assert len(db.steps(run)) == 2
    cps = [e for e in db.checkpoint_events(run) if e.kind == "checkpoint"]
    assert [(e.run_id, e.step) for e in cps] == [(run, 1), (run, 2)]
    # a checkpoint event carries no content, only step metadata
    assert all(e.detail is None for e in cps)


def test_a_rolled_back_step_leaves_the_prior_checkpoint_intact(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.checkpoint_step(run, StepRecord.new(1, "act", "ok"))

    class Crash(Exception):
        pass

    # the step's transaction is opened and both rows written, then it never commits
    with pytest.raises(Crash), db.transaction():
        db.checkpoint_step(run, StepRecord.new(2, "act", "ok"))
        raise Crash

    assert db.last_step(run) == 1, "the torn step must not survive"
    assert len(db.steps(run)) == 1
    assert [e.step for e in db.checkpoint_events(run)] == [1]


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


def test_status_round_trips_and_a_pre_0_7_database_migrates(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.6", "INSERT INTO runs (goal, file) VALUES ('g', 'f')")
    with Store.open(path) as db:
        assert db.status(1) == "running"  # the old row gains the default status
        assert db.elapsed_secs(1) == 0.0  # and has no start stamp
        db.set_status(1, "completed")
        assert db.status(1) == "completed"
        assert db.run_status(1) is RunStatus.COMPLETED
        assert db.status(2) is None
    assert up.read_at(str(path), "status", 1) == [("completed",)]
    assert up.read_at(str(path), "started_at", 1) == [(None,)]


def test_the_entry_count_cap_evicts_oldest_first_and_never_the_new_entry(
    db: Store, ws: str
) -> None:
    for i in range(MEMORY_MAX_ENTRIES):
        assert db.memory_put(ws, f"k{i}", "v", 1, 1) == [], "no eviction under the cap"
    assert len(db.memory_list(ws)) == MEMORY_MAX_ENTRIES

    evicted: list[str] = []
    for i in range(3):
        evicted += db.memory_put(ws, f"new{i}", "v", 2, 2)
    assert evicted == ["k0", "k1", "k2"]

    listed = keys(db.memory_list(ws))
    assert len(listed) == MEMORY_MAX_ENTRIES
    assert "k0" not in listed
    assert all(f"new{i}" in listed for i in range(3))


def test_the_total_chars_cap_evicts_before_the_count_cap_is_reached(db: Store, ws: str) -> None:
    big = "x" * MEMORY_MAX_ENTRY_CHARS
    evicted: list[str] = []
    for i in range(10):  # 10 x 2,000 = 20,000 chars, far below 64 entries
        evicted += db.memory_put(ws, f"k{i}", big, 1, 1)
    assert evicted == ["k0", "k1"], "oldest first, count cap untouched"
    entries = db.memory_list(ws)
    assert len(entries) == 8
    assert sum(len(e.value) for e in entries) == MEMORY_MAX_CHARS


def test_an_oversized_value_is_truncated_with_a_marker_not_rejected(db: Store, ws: str) -> None:
    huge = "é" * (MEMORY_MAX_ENTRY_CHARS * 2)  # multibyte: a byte-wise cut would not be UTF-8
    assert db.memory_put(ws, "k", huge, 1, 1) == []
    entry = db.memory_get(ws, "k")
    assert entry is not None
    assert len(entry.value) == MEMORY_MAX_ENTRY_CHARS
    assert entry.value.endswith(TRUNCATED), "the cut is visible"
    kept = MEMORY_MAX_ENTRY_CHARS - len(TRUNCATED)
    assert entry.value[:kept] == "é" * kept


def test_a_0_9_1_store_opens_unchanged_and_still_resumes(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    written = legacy.build_born_at(path, "0.9")
    with closing(sqlite3.connect(path)) as conn:
        before_format = conn.execute("PRAGMA user_version").fetchone()[0]
        before = legacy.read_answers(conn, "0.9", written)
        assert "memory" not in legacy.user_tables(conn)

    with Store.open(path) as db:
        for run in written.run_ids:
            db.check_resumable(run)  # the 0.7 durability promise
        root = written.roots[0]
        assert db.last_step(root) == 3
        assert db.run_status(written.roots[2]) is RunStatus.RUNNING  # the crashed run
        assert db.memory_list("ws") == []
        db.memory_put("ws", "k", "v", 1, 1)
        entry = db.memory_get("ws", "k")
        assert entry is not None and entry.value == "v"

    with closing(sqlite3.connect(path)) as conn:
        after_format = conn.execute("PRAGMA user_version").fetchone()[0]
        assert after_format == before_format == CHECKPOINT_FORMAT, "the format must not move"
        assert legacy.read_answers(conn, "0.9", written) == before


LAYERED_POLICY: dict[str, Any] = {
    "layers": [
        {"name": "base", "rules": [{"act": "write", "effect": "deny", "pattern": "secrets/*"}]},
        {
            "name": "task",
            "rules": [
                {"act": "write", "effect": "deny", "pattern": "vendor/**"},
                {"act": "exec", "effect": "allow", "pattern": "cargo"},
            ],
        },
    ],
    "defaults": {"read": "allow", "write": "ask", "exec": "ask", "net": "deny"},
}
PERMISSIVE_POLICY: dict[str, Any] = {
    "layers": [],
    "defaults": {"read": "allow", "write": "allow", "exec": "allow", "net": "allow"},
}


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


# =============================================================================================
# 2. rows this Store writes, read back with upstream's own SQL
# =============================================================================================


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
    store.record_event(a, PolicyEvent.refusal(1, "read", ".env").with_rule(".env", "builtin"))
    store.record_event(
        a, PolicyEvent.decision(2, "write", "out.txt", "approve", "cli").with_performed("o2")
    )
    store.record_checkpoint_event(CheckpointEvent.resume(a, 2, "resumed after a crash"))
    store.record_checkpoint_event(CheckpointEvent.skipped(a, 1))
    c1 = store.start_child_run("child one", "c1.txt", a, 1)
    gc = store.start_child_run("grandchild", "g.txt", c1, 2)
    store.record_agent_event(AgentEvent.spawn(a, 2, c1, "child one"))
    store.record_agent_event(AgentEvent.budget_draw(c1, 1, 1000, BIG))
    store.record_spawn(a, 2, c1, "child one", "c1.txt", "done", 3, '["src/**","*.lock"]')
    store.record_spawn(c1, 1, gc, "grandchild", "g.txt", "", None, "[]")
    store.checkpoint_step(c1, StepRecord(1, "spawned", "r", "", "", 1000))
    store.checkpoint_step(gc, StepRecord(1, "wrote", "r", "", "", 5))
    store.record_sandbox_event(SandboxEvent.create(a, 1, "linux-bwrap"))
    store.record_sandbox_event(SandboxEvent.exec(a, 1, "linux-bwrap", "rustc a.rs"))
    store.record_sandbox_event(SandboxEvent.gate_phase_failed(a, 3, "criterion-compile"))
    store.record_mcp(a, McpEvent.connected("fs", "stdio").with_millis(12))
    store.record_mcp(a, McpEvent.called("fs", "fs__read", True).at_step(1).with_millis(BIG))
    store.record_mcp(a, McpEvent.called("fs", "fs__write", False).at_step(2))
    store.record_mcp(a, McpEvent.disconnected("fs").at_step(3).with_detail(""))
    store.record_context_event(a, ContextEvent.assembled(1, "carried=3 stubbed=5", 900))
    store.record_context_reported(a, 1, 1234)
    store.record_context_event(a, ContextEvent.reread(2, "a.txt changed"))
    store.memory_put("/ws", "build", "cargo build", a, 1)
    store.memory_put("/ws", "test", "cargo test", a, 2)
    store.record_run_policy(a, LAYERED_POLICY)
    obs = [
        Observation(1 + i // 4, kind, None if kind in ("message", "error") else f"t{i}", f"x{i}")
        for i, kind in enumerate(ObsKind)
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


def test_a_pre_0_7_run_finished_here_gets_a_null_duration(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    written = legacy.build_born_at(path, "0.6")
    crashed = written.roots[2]
    with Store.open(path) as db:
        db.checkpoint_step(crashed, StepRecord(99, "resumed", "ok", "", "", 1))
        db.finish_run(crashed, "success")
    (row,) = up.read_at(str(path), "run_summary", crashed)
    assert row[2] == 1 and row[3] == 99 and row[5] is None


# =============================================================================================
# 4. crashes and transactions
# =============================================================================================

CRASH_SCRIPT = r"""
import sys, time
mode, target, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
big = ("torn step " * 500_000)  # ~5 MB: more than SQLite's page cache, so pages spill
if mode == "store":
    from harness_store import Store, StepRecord
    store = Store.open(target)
    with store.transaction():
        store.checkpoint_step(run, StepRecord(2, "act", big, "", "", 5))
        store.memory_put("ws", "k", "from the dead step", run, 2)
        print("ready", flush=True)
        time.sleep(120)
else:  # the torn half, as upstream's checkpoint_step has it after its first statement
    sys.path.insert(0, sys.argv[4])
    from support import upstream_sql as up
    if up.is_postgres(target):
        import psycopg
        conn = psycopg.connect(up.pg_conninfo(target))
        conn.execute(up.INSERT_STEP.replace("?", "%s"), (run, 2, "act", big, "", "", 5))
    else:
        import sqlite3
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(up.INSERT_STEP, (run, 2, "act", big, "", "", 5))
    print("ready", flush=True)
    time.sleep(120)
"""


def _kill_inside_checkpoint(target: str, run: int, mode: str) -> None:
    """Run CRASH_SCRIPT until its write transaction holds the uncommitted step, then SIGKILL."""
    here = str(Path(__file__).resolve().parents[1])
    child = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, mode, target, str(run), here],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 60)
        line = child.stdout.readline() if ready else ""
        if line.strip() != "ready":
            child.kill()
            pytest.fail(f"the writer never got inside its transaction: {child.communicate()}")
        if not up.is_postgres(target):
            wal = Path(target + "-wal")
            assert wal.exists() and wal.stat().st_size > 1_000_000, "uncommitted pages on disk"
        # a second process may read the trace while the writer is inside its transaction
        with Store.open(target) as reader:
            assert reader.last_step(run) == 1
            assert len(reader.checkpoint_events(run)) == 1
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        for stream in (child.stdout, child.stderr):
            if stream:
                stream.close()
    assert child.returncode == -signal.SIGKILL


def test_a_process_killed_inside_checkpoint_step_leaves_no_torn_step(store_target: str) -> None:
    """Killed holding both rows (Store.transaction + checkpoint_step + a memory write), and
    killed holding only the step row (upstream's statement order, first half done)."""
    for mode in ("store", "raw"):
        with Store.open(store_target) as store:
            run = store.start_run(f"goal {mode}", "root")
            store.checkpoint_step(run, StepRecord(1, "act", "ok", "", "", 7))

        _kill_inside_checkpoint(store_target, run, mode)

        with Store.open(store_target) as store:
            assert store.last_step(run) == 1, mode
            assert store.steps(run) == [StepRecord(1, "act", "ok", "", "", 7)]
            assert [(e.step, e.kind) for e in store.checkpoint_events(run)] == [(1, "checkpoint")]
            assert store.spent_tokens(run) == 7
            assert store.memory_list("ws") == []
            # and the store takes the step again as if nothing had happened
            store.checkpoint_step(run, StepRecord(2, "act", "again", "", "", 1))
            assert store.last_step(run) == 2
        assert up.read_at(store_target, "checkpoint_events", run) == [
            (run, 1, "checkpoint", None),
            (run, 2, "checkpoint", None),
        ]
        if not up.is_postgres(store_target):
            assert raw(store_target, "PRAGMA integrity_check") == [("ok",)]


def test_a_transaction_rolls_every_write_back_on_an_exception(
    db: Store, ws: str, db_target: str
) -> None:
    keep = db.start_run("kept", "f")
    before = counts(db_target)
    runs_before = db.runs()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), db.transaction():
        run = db.start_run("goal", "root")
        child = db.start_child_run("c", "f", run, 1)
        db.set_provider(keep, "changed inside")
        db.checkpoint_step(run, StepRecord(1, "act", "ok", "", "", 5))
        db.checkpoint_steps(run, [StepRecord(2, "a", "", "", "", 1)] * 3)
        db.record_event(run, PolicyEvent.refusal(1, "read", ".env"))
        db.put_pending(run, 1, "write", "x", None)
        db.record_agent_event(AgentEvent.spawn(run, 1, child, "c"))
        db.record_mcp(run, McpEvent.connected("fs", "stdio"))
        db.record_context_event(run, ContextEvent.assembled(1, "d", 1))
        db.memory_put(ws, "k", "v", run, 1)
        db.record_run_policy(run, PERMISSIVE_POLICY)
        db.record_observations(run, [Observation(1, ObsKind.READ, "a", "b")])
        db.finish_run(run, "success")
        assert db.last_step(run) == 2  # reads inside the block see its writes
        raise Boom

    assert counts(db_target) == before
    assert db.provider(keep) is None
    assert db.runs() == runs_before
    assert runs_before[0] == keep


def test_nested_transactions_join_the_outer_one(db: Store, db_target: str) -> None:
    class Boom(Exception):
        pass

    before = counts(db_target)
    runs_before = up.read_at(db_target, "runs")
    with pytest.raises(Boom), db.transaction():
        run = db.start_run("goal", "root")
        with db.transaction():
            db.checkpoint_step(run, StepRecord(1, "inner", "ok", "", "", 1))
        # the inner block has ended, but nothing is committed until the outer one is
        assert up.read_at(db_target, "steps", run) == []
        raise Boom
    assert counts(db_target) == before
    assert up.read_at(db_target, "runs") == runs_before

    with db.transaction():
        run = db.start_run("goal", "root")
        with db.transaction():
            db.checkpoint_step(run, StepRecord(1, "inner", "ok", "", "", 1))
        db.checkpoint_step(run, StepRecord(2, "outer", "ok", "", "", 1))
        assert up.read_at(db_target, "runs") == runs_before, "invisible to others before commit"
    assert [r[0] for r in up.read_at(db_target, "steps", run)] == [1, 2]
    assert len(up.read_at(db_target, "checkpoint_events", run)) == 2


def test_another_threads_write_is_not_part_of_a_rolled_back_transaction(
    db: Store,
) -> None:
    other: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            other.append(db.start_run("other thread", "f"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    class Boom(Exception):
        pass

    runs_before = db.runs()
    thread = threading.Thread(target=write)
    with pytest.raises(Boom), db.transaction():
        db.start_run("mine", "f")
        thread.start()
        time.sleep(0.2)
        raise Boom
    thread.join(timeout=30)
    assert not errors
    assert db.runs() == other + runs_before
    assert [n.goal for n in db.tree(other[0])] == ["other thread"]


# =============================================================================================
# 5. memory caps at their edges
# =============================================================================================


def _age_workspace(target: str, workspace: str) -> None:
    """Stamp a workspace's entries in the future, as another host whose clock runs ahead
    would; the next write is then the oldest by `created_at`."""
    raw(
        target,
        "UPDATE memory SET created_at = '2999-01-01T00:00:00.000Z' WHERE workspace = ?",
        workspace,
    )


def test_memory_64_entries_fit_and_the_65th_evicts_the_oldest(db: Store, ws: str) -> None:
    db.memory_put(f"{ws}/other", "o", "untouched", 9, 9)
    other_before = db.memory_list(f"{ws}/other")
    for i in range(MEMORY_MAX_ENTRIES):
        assert db.memory_put(ws, f"k{i:02}", f"v{i}", 1, i) == []
    assert keys(db.memory_list(ws)) == [f"k{i:02}" for i in range(MEMORY_MAX_ENTRIES)]
    assert db.memory_put(ws, "k64", "v", 1, 64) == ["k00"]
    listed = keys(db.memory_list(ws))
    assert len(listed) == MEMORY_MAX_ENTRIES
    assert listed[0] == "k01" and listed[-1] == "k64"
    assert db.memory_get(ws, "k00") is None
    assert db.memory_list(f"{ws}/other") == other_before


def test_memory_16000_chars_fit_and_one_more_evicts(db: Store, ws: str) -> None:
    # multibyte and astral characters: the cap counts characters, never bytes
    unit = "é🦀" * (MEMORY_MAX_ENTRY_CHARS // 2)
    for i in range(8):
        assert db.memory_put(ws, f"k{i}", unit, 1, 1) == []
    entries = db.memory_list(ws)
    assert sum(len(e.value) for e in entries) == MEMORY_MAX_CHARS
    assert all(e.value == unit for e in entries)
    assert db.memory_put(ws, "one", "x", 1, 2) == ["k0"]
    assert sum(len(e.value) for e in db.memory_list(ws)) == MEMORY_MAX_CHARS - 2000 + 1


def test_memory_overwrite_counts_the_new_value_not_both(db: Store, ws: str) -> None:
    for i in range(8):
        db.memory_put(ws, f"k{i}", "x" * 1999, 1, 1)
    # 7 x 1,999 + 2,000 = 15,993: the overwrite replaces, so nothing is evicted
    assert db.memory_put(ws, "k3", "y" * 2000, 1, 2) == []
    assert len(db.memory_list(ws)) == 8


def test_memory_value_of_2000_chars_is_kept_and_2001_is_cut(db: Store, ws: str) -> None:
    exact = "".join(chr(0x4E00 + i % 500) for i in range(MEMORY_MAX_ENTRY_CHARS))
    db.memory_put(ws, "exact", exact, 1, 1)
    entry = db.memory_get(ws, "exact")
    assert entry is not None and entry.value == exact

    over = exact + "!"
    db.memory_put(ws, "over", over, 1, 1)
    entry = db.memory_get(ws, "over")
    assert entry is not None
    assert len(entry.value) == MEMORY_MAX_ENTRY_CHARS
    assert entry.value == exact[: MEMORY_MAX_ENTRY_CHARS - len(TRUNCATED)] + TRUNCATED
    # a value that ends in the marker itself but fits is left alone
    db.memory_put(ws, "marker", "short" + TRUNCATED, 1, 1)
    entry = db.memory_get(ws, "marker")
    assert entry is not None and entry.value == "short" + TRUNCATED


def test_memory_overwrite_refreshes_created_at_and_moves_the_key_to_newest(
    db: Store,
    ws: str,
) -> None:
    for k in ("a", "b", "c"):
        db.memory_put(ws, k, "v", 1, 1)
        time.sleep(0.005)
    first = db.memory_get(ws, "a")
    assert first is not None
    db.memory_put(ws, "a", "new value", 2, 7)
    again = db.memory_get(ws, "a")
    assert again is not None
    assert stamp(again.created_at) > stamp(first.created_at)
    assert (again.value, again.run_id, again.step) == ("new value", 2, 7)
    assert keys(db.memory_list(ws)) == ["b", "c", "a"]
    # the refreshed key is no longer the first to go
    for i in range(MEMORY_MAX_ENTRIES - 3):
        db.memory_put(ws, f"f{i}", "v", 1, 1)
    assert db.memory_put(ws, "last", "v", 1, 1) == ["b"]
    assert db.memory_put(ws, "last2", "v", 1, 1) == ["c"]
    assert db.memory_get(ws, "a") is not None


def test_memory_never_evicts_the_entry_just_written(db: Store, ws: str, db_target: str) -> None:
    for i in range(8):  # 16,000 chars, stamped ahead of the next write
        db.memory_put(ws, f"k{i}", "x" * MEMORY_MAX_ENTRY_CHARS, 1, 1)
    _age_workspace(db_target, ws)
    # the new entry is the oldest by created_at and alone as big as an entry may be
    assert db.memory_put(ws, "big", "y" * 5000, 1, 2) == ["k0"]
    listed = keys(db.memory_list(ws))
    assert listed[0] == "big"
    assert "k0" not in listed and len(listed) == 8
    big = db.memory_get(ws, "big")
    assert big is not None and len(big.value) == MEMORY_MAX_ENTRY_CHARS

    for i in range(MEMORY_MAX_ENTRIES):
        db.memory_put(f"{ws}/count", f"k{i:02}", "v", 1, 1)
    _age_workspace(db_target, f"{ws}/count")
    assert db.memory_put(f"{ws}/count", "new", "v", 1, 2) == ["k00"]
    assert db.memory_get(f"{ws}/count", "new") is not None


def test_memory_returns_every_evicted_key_oldest_first(db: Store, ws: str) -> None:
    for i in range(20):  # 20 x 800 = 16,000
        db.memory_put(ws, f"k{i:02}", "x" * 800, 1, 1)
    db.memory_put(f"{ws}/2", "keep", "x" * 2000, 1, 1)
    second = db.memory_list(f"{ws}/2")
    # +2,000 = 18,000: three 800-char entries must go to get back under 16,000
    assert db.memory_put(ws, "big", "y" * 2000, 1, 2) == ["k00", "k01", "k02"]
    entries = db.memory_list(ws)
    assert len(entries) == 18
    assert sum(len(e.value) for e in entries) == 17 * 800 + 2000
    assert db.memory_list(f"{ws}/2") == second, "other workspaces are untouched"


def test_memory_delete_and_clear_stay_in_their_workspace(db: Store, ws: str) -> None:
    db.memory_put(f"{ws}/a", "k", "v", 1, 1)
    db.memory_put(f"{ws}/a", "k2", "v", 1, 1)
    db.memory_put(f"{ws}/b", "k", "v", 1, 1)
    assert db.memory_delete(f"{ws}/a", "k") is True
    assert db.memory_delete(f"{ws}/a", "k") is False
    assert db.memory_get(f"{ws}/b", "k") is not None
    assert db.memory_clear(f"{ws}/a") == 1
    assert db.memory_clear(f"{ws}/a") == 0
    assert keys(db.memory_list(f"{ws}/b")) == ["k"]
    assert db.memory_list(f"{ws}/a") == []


# =============================================================================================
# 6. hostile strings, NUL and out-of-range values
# =============================================================================================

CONTROL = (
    "".join(chr(c) for c in range(1, 32)) + "\x7f" + "".join(chr(c) for c in range(0x80, 0xA0))
)
HOSTILE: tuple[str, ...] = (
    "it's a 'single' quote",
    'say "double" quotes',
    "'; DROP TABLE runs; --",
    "Robert'); DROP TABLE steps;--",
    "%s %(name)s ? ?1 :name $1 {0} \\N \\x00",
    "100% _like_ wildcards \\ back\\slash",
    "crab 🦀 family 👩\u200d👩\u200d👧 flag 🇳🇴 math 𝕏",
    "RTL مرحبا بالعالم שלום \u202eoverride\u202c \u200f",
    "combining e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353",
    "日本語 中文 한국어",
    CONTROL,
    "\u2028\u2029\ufeff\ufffd\uffff",
    "",
    "  spaces around  ",
    "tab\there\r\nCRLF\n",
)
MEGABYTE = ("0123456789abcdé🦀\n" * 62_500)[:1_000_000]


def test_hostile_strings_round_trip_verbatim(db: Store, db_target: str) -> None:
    values = HOSTILE
    runs_before, before = len(db.runs()), counts(db_target)
    for s in values:
        run = db.start_run(s, s)
        db.set_provider(run, s)
        db.checkpoint_step(run, StepRecord(1, s, s, s, s, 1))
        db.record_event(run, PolicyEvent(1, s, s, s, s, s, s, s, s))
        pending = db.put_pending(run, 1, s, s, s)
        db.resolve_pending(pending, s)
        db.record_agent_event(AgentEvent(run, 1, s, None, s, None, None))
        db.record_sandbox_event(SandboxEvent(run, 1, s, s, s))
        db.record_checkpoint_event(CheckpointEvent(run, 1, s, s))
        db.record_mcp(run, McpEvent(1, s, s, s, None, None, s))
        db.record_context_event(run, ContextEvent(1, s, s))
        db.record_spawn(run, 1, run, s, s, s, None, s)
        db.record_observations(run, [Observation(1, ObsKind.MESSAGE, s, s)])
        db.record_run_policy(
            run, {"layers": [{"name": s, "rules": []}], "defaults": PERMISSIVE_POLICY["defaults"]}
        )
        db.memory_put(s, s, s, run, 1)
        db.finish_run(run, s)

        assert db.steps(run) == [StepRecord(1, s, s, s, s, 1)]
        assert db.provider(run) == s
        assert db.events(run) == [PolicyEvent(1, s, s, s, s, s, s, s, s)]
        p = db.pending(pending)
        assert p is not None and (p.act, p.target, p.content, p.resolved) == (s, s, s, s)
        assert db.agent_events(run)[0].kind == s and db.agent_events(run)[0].detail == s
        assert db.sandbox_events(run) == [SandboxEvent(run, 1, s, s, s)]
        assert db.checkpoint_events(run)[-1] == CheckpointEvent(run, 1, s, s)
        assert db.mcp_events(run) == [McpEvent(1, s, s, s, None, None, s)]
        assert db.context_events(run) == [ContextEvent(1, s, s)]
        spawn = db.find_spawn(run, 1, s)
        assert spawn is not None and (spawn.goal, spawn.needle, spawn.deny_write) == (s, s, s)
        assert db.observations(run) == [Observation(1, ObsKind.MESSAGE, s, s)]
        assert db.run_policy(run) == {
            "layers": [{"name": s, "rules": []}],
            "defaults": PERMISSIVE_POLICY["defaults"],
        }
        entry = db.memory_get(s, s)
        assert entry is not None and (entry.key, entry.value) == (s, s)
        assert [e.key for e in db.memory_list(s)] == [s]
        assert db.outcome(run) == s
        assert db.canonical_trace(run).startswith(f"step 1 | tokens 1 | decision {s} |")

        # and upstream's SQL on a connection of our own reads the same characters back
        with up.connect(db_target) as conn:
            assert up.read(conn, "steps", run) == [(1, s, s, s, s, 1)]
            assert up.execute(
                conn, "SELECT goal, file, outcome FROM runs WHERE id = ?", (run,)
            ) == [(s, s, s)]
            assert up.read(conn, "memory_get", s, s)[0][:2] == (s, s)
            if not up.is_postgres(db_target):
                assert up.execute(
                    conn,
                    "SELECT typeof(goal), typeof(result) FROM runs, steps "
                    "WHERE runs.id = ? AND steps.run_id = runs.id",
                    (run,),
                ) == [("text", "text")]
    # nothing was dropped or run as SQL
    assert len(db.runs()) == runs_before + len(values)
    assert counts(db_target)["steps"] == before["steps"] + len(values)


def test_a_megabyte_of_text_round_trips_verbatim(db: Store, db_target: str, ws: str) -> None:
    mb = MEGABYTE
    assert len(mb) == 1_000_000
    run = db.start_run(mb, "f")
    db.checkpoint_step(run, StepRecord(1, "read big.txt", mb, mb, "", 1))
    db.record_observations(run, [Observation(1, ObsKind.READ, "big.txt", mb)])
    db.record_context_event(run, ContextEvent.reread(1, mb))
    db.memory_put(ws, "big", mb, run, 1)
    assert db.steps(run) == [StepRecord(1, "read big.txt", mb, mb, "", 1)]
    assert list(db.iter_steps(run, page=1)) == db.steps(run)
    assert db.observations(run)[0].text == mb
    assert db.context_events(run)[0].detail == mb
    assert db.canonical_trace(run).endswith(f"result {mb}\ncontext 1 | reread | {mb}\n")
    entry = db.memory_get(ws, "big")
    assert entry is not None
    assert entry.value == mb[: MEMORY_MAX_ENTRY_CHARS - len(TRUNCATED)] + TRUNCATED
    with up.connect(db_target) as conn:
        assert up.read(conn, "steps", run) == [(1, "read big.txt", mb, mb, "", 1)]
        assert up.execute(conn, "SELECT goal FROM runs WHERE id = ?", (run,)) == [(mb,)]


def _nul_writes(db: Store, run: int, ws: str) -> list[tuple[str, Callable[[], Any]]]:
    n = "bad\x00value"
    return [
        ("start_run", lambda: db.start_run(n, "f")),
        ("start_child_run", lambda: db.start_child_run("g", n, run, 1)),
        ("set_provider", lambda: db.set_provider(run, n)),
        ("set_status", lambda: db.set_status(run, n)),
        ("checkpoint_step", lambda: db.checkpoint_step(run, StepRecord(5, "d", "r", "p", n))),
        ("record", lambda: db.record(run, StepRecord(5, "d", n))),
        ("checkpoint_steps", lambda: db.checkpoint_steps(
            run, [StepRecord(5, "ok", ""), StepRecord(6, n, "")])),
        ("record_event", lambda: db.record_event(run, PolicyEvent.refusal(1, "read", n))),
        ("put_pending", lambda: db.put_pending(run, 1, "write", "t", n)),
        ("record_agent_event", lambda: db.record_agent_event(AgentEvent.spawn_refused(run, 1, n))),
        ("record_sandbox_event", lambda: db.record_sandbox_event(
            SandboxEvent.exec(run, 1, "b", n))),
        ("record_checkpoint_event", lambda: db.record_checkpoint_event(
            CheckpointEvent.resume(run, 1, n))),
        ("record_mcp", lambda: db.record_mcp(run, McpEvent.connected(n, "stdio"))),
        ("record_context_event", lambda: db.record_context_event(
            run, ContextEvent.reread(1, n))),
        ("record_spawn", lambda: db.record_spawn(run, 1, run, "g", "v", n, None, "[]")),
        ("record_observations", lambda: db.record_observations(
            run, [Observation(1, ObsKind.READ, "a", "ok"), Observation(1, ObsKind.READ, "a", n)])),
        ("record_run_policy", lambda: db.record_run_policy(run, '{"a": "' + n + '"}')),
        ("memory_put key", lambda: db.memory_put(ws, n, "v", run, 1)),
        ("memory_put value", lambda: db.memory_put(ws, "k", n, run, 1)),
        ("memory_put workspace", lambda: db.memory_put(n, "k", "v", run, 1)),
        ("finish_run", lambda: db.finish_run(run, n)),
    ]  # fmt: skip


def _range_writes(db: Store, run: int, ws: str) -> list[tuple[str, Callable[[], Any]]]:
    return [
        ("negative step", lambda: db.checkpoint_step(run, StepRecord(-1, "d", "r"))),
        ("step 2**32", lambda: db.checkpoint_step(run, StepRecord(U32_MAX + 1, "d", "r"))),
        ("tokens 2**63", lambda: db.checkpoint_step(
            run, StepRecord(1, "d", "r", "", "", I64_MAX + 1))),
        ("tokens 2**64", lambda: db.record(run, StepRecord(1, "d", "r", "", "", 2**64))),
        ("negative tokens", lambda: db.record(run, StepRecord(1, "d", "r", "", "", -1))),
        ("batch with one bad step", lambda: db.checkpoint_steps(
            run, [StepRecord(1, "d", "r"), StepRecord(-5, "d", "r")])),
        ("pending step", lambda: db.put_pending(run, -1, "write", "t", None)),
        ("event step", lambda: db.record_event(run, PolicyEvent.refusal(U32_MAX + 1, "r", "t"))),
        ("draw tokens", lambda: db.record_agent_event(
            AgentEvent.budget_draw(run, 1, I64_MAX + 1, 0))),
        ("draw remaining", lambda: db.record_agent_event(
            AgentEvent.budget_draw(run, 1, 0, -1))),
        ("mcp millis", lambda: db.record_mcp(
            run, McpEvent.connected("s", "t").with_millis(2**64))),
        ("context est", lambda: db.record_context_event(
            run, ContextEvent.assembled(1, "d", 2**64))),
        ("child depth", lambda: db.start_child_run("g", "f", run, U32_MAX + 1)),
        ("child depth negative", lambda: db.start_child_run("g", "f", run, -1)),
        ("spawn max_steps", lambda: db.record_spawn(run, 1, run, "g", "v", "n", U32_MAX + 1, "[]")),
        ("memory step", lambda: db.memory_put(ws, "k", "v", run, -1)),
        ("observation step", lambda: db.record_observations(
            run, [Observation(1, ObsKind.READ, "a", "ok"),
                  Observation(-1, ObsKind.READ, "a", "x")])),
        ("run id 2**63", lambda: db.checkpoint_step(I64_MAX + 1, StepRecord(1, "d", "r"))),
    ]  # fmt: skip


def test_nul_and_out_of_range_values_raise_and_write_nothing(
    db: Store, ws: str, db_target: str
) -> None:
    run = db.start_run("g", "f")
    db.checkpoint_step(run, StepRecord(1, "d", "r"))
    db.memory_put(ws, "k", "original", run, 1)
    before = counts(db_target)
    steps_before = up.read_at(db_target, "steps", run)
    failures = []
    for name, write in _nul_writes(db, run, ws) + _range_writes(db, run, ws):
        try:
            write()
        except InvalidValueError:
            pass
        except Exception as exc:
            failures.append(f"{name}: raised {type(exc).__name__}: {exc}")
        else:
            failures.append(f"{name}: accepted")
        after = counts(db_target)
        if after != before:
            changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
            failures.append(f"{name}: wrote {changed}")
            before = after
    assert not failures, "\n".join(failures)
    assert up.read_at(db_target, "steps", run) == steps_before
    assert db.provider(run) is None and db.status(run) == "running"
    entry = db.memory_get(ws, "k")
    assert entry is not None and entry.value == "original"


def test_the_largest_in_range_values_round_trip(db: Store, db_target: str) -> None:
    run = db.start_run("g", "f")
    db.checkpoint_step(run, StepRecord(U32_MAX, "d", "r", "", "", I64_MAX))
    db.checkpoint_step(run, StepRecord(0, "d", "r", "", "", 0))
    assert db.last_step(run) == U32_MAX
    assert db.steps(run)[-1] == StepRecord(U32_MAX, "d", "r", "", "", I64_MAX)
    assert up.read_at(db_target, "steps", run)[-1] == (U32_MAX, "d", "r", "", "", I64_MAX)
    db.record_agent_event(AgentEvent.budget_draw(run, U32_MAX, I64_MAX, I64_MAX))
    assert db.agent_events(run)[0].tokens == I64_MAX


def test_an_invalid_value_inside_a_transaction_rolls_the_block_back(
    db: Store, db_target: str
) -> None:
    before = counts(db_target)
    with pytest.raises(InvalidValueError), db.transaction():
        run = db.start_run("g", "f")
        db.checkpoint_step(run, StepRecord(1, "d", "r"))
        db.checkpoint_step(run, StepRecord(2, "d", "bad\x00"))
    assert counts(db_target) == before


# =============================================================================================
# 7. old stores: upgraded by default, refused unchanged on request
# =============================================================================================


@pytest.mark.parametrize("release", ["0.1", "0.6", "0.7", "0.12", "0.13"])
def test_an_old_store_is_upgraded_on_open_with_a_backup(tmp_path: Path, release: str) -> None:
    path = tmp_path / "runs.sqlite3"
    written = legacy.build_born_at(path, release)
    with closing(sqlite3.connect(path)) as conn:
        answers = legacy.read_answers(conn, release, written)
        rows = legacy.dump(conn, typed=True)

    with Store.open(path) as db:
        report: Any = db.upgrade_report
        assert report is not None
        assert report.before == release
        assert report.stamped == release
        assert report.after == HEAD
        backup = Path(report.backup)
        assert backup.parent == path.parent and backup.name.startswith(path.name)
        assert backup.exists()

    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".bak")) == [backup.name]
    with closing(sqlite3.connect(backup)) as conn:
        assert legacy.dump(conn, typed=True) == rows, "the backup is the store as it was"
    with closing(sqlite3.connect(path)) as conn:
        # every read of the old release answers as before, and no row changed
        assert legacy.read_answers(conn, release, written) == answers
        assert legacy.dump(conn, _columns_of(backup), typed=True) == rows
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == CHECKPOINT_FORMAT

    # the new release's tables are there and usable on the old runs
    with Store.open(path) as db:
        assert db.upgrade_report is None, "a second open has nothing to do"
        root, crashed = written.roots[0], written.roots[2]
        db.record_run_policy(root, PERMISSIVE_POLICY)
        assert db.run_policy(root) == PERMISSIVE_POLICY
        db.memory_put("ws", "k", "v", root, 1)
        last = db.last_step(crashed)
        db.checkpoint_step(crashed, StepRecord(last + 1, "resumed", "ok", "", "", 1))
        db.finish_run(crashed, "success")
        summary = db.run_summary(crashed)
        assert summary is not None and summary.steps == last + 1
        assert (summary.duration_ms is None) == (int(release.split(".")[1]) < 7)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".bak")) == [backup.name]


def _columns_of(path: Path) -> dict[str, list[str]]:
    with closing(sqlite3.connect(path)) as conn:
        return legacy.column_names(conn)


@pytest.mark.parametrize("release", ["0.1", "0.6", "0.12"])
def test_an_old_store_opened_without_upgrade_is_refused_and_unchanged(
    tmp_path: Path, release: str
) -> None:
    path = tmp_path / "runs.sqlite3"
    legacy.build_born_at(path, release)
    digest = sha256(path)
    listing = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(UpgradeRequiredError) as info:
        Store.open(path, upgrade=False)
    message = str(info.value)
    assert "harness-store upgrade" in message
    assert str(path) in message
    assert sha256(path) == digest
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        n for n in listing if not n.endswith(("-wal", "-shm"))
    ], "no backup, no new file"
    with closing(sqlite3.connect(path)) as conn:
        assert "alembic_version" not in {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master")
        }


# =============================================================================================
# 8. threads
# =============================================================================================


def test_eight_threads_checkpointing_through_one_store(db: Store, db_target: str) -> None:
    threads_n, steps_n = 8, 200
    runs = [db.start_run(f"thread {i}", "f") for i in range(threads_n)]
    shared = db.start_run("shared", "f")
    before = counts(db_target)
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n)

    def work(i: int) -> None:
        try:
            barrier.wait()
            for step in range(1, steps_n + 1):
                db.checkpoint_step(runs[i], StepRecord(step, f"t{i}", f"s{step}", "", "", i))
                if step % 50 == 0:
                    db.checkpoint_step(shared, StepRecord(step, f"t{i}", "", "", "", 1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    with up.connect(db_target) as conn:
        for i, run in enumerate(runs):
            steps = up.read(conn, "steps", run)
            assert [s[0] for s in steps] == list(range(1, steps_n + 1))
            assert {s[1] for s in steps} == {f"t{i}"}
            events = up.read(conn, "checkpoint_events", run)
            assert [(e[1], e[2]) for e in events] == [
                (s, "checkpoint") for s in range(1, steps_n + 1)
            ]
            assert up.read(conn, "spent_tokens", run) == [(i * steps_n,)]
        shared_steps = up.read(conn, "steps", shared)
        assert len(shared_steps) == threads_n * (steps_n // 50)
        assert sorted(e[1] for e in up.read(conn, "checkpoint_events", shared)) == sorted(
            s[0] for s in shared_steps
        )
    added = threads_n * steps_n + threads_n * (steps_n // 50)
    after = counts(db_target)
    assert after["steps"] == before["steps"] + added
    assert after["checkpoint_events"] == before["checkpoint_events"] + added


# =============================================================================================
# 9. canonical_trace, iter_steps, tree
# =============================================================================================


def test_canonical_trace_is_upstreams_exact_text(db: Store, ws: str) -> None:
    run = db.start_run("goal", "out.txt")
    other = db.start_run("noise", "x")
    db.checkpoint_step(
        run,
        StepRecord(
            1, "read a.txt", "[read a.txt]\nhello | world", "Goal: x", '{"path":"a.txt"}', 120
        ),
    )
    db.record(run, StepRecord(2, "retry 1 after error", "rate limited", "Goal: x", "", 5))
    db.checkpoint_step(run, StepRecord(2, "wrote out.txt", "ok", "P2", "write:{}", 80))
    db.checkpoint_step(run, StepRecord(3, "verified", "", "", "", 0))
    db.record(run, StepRecord(1, "late row for step 1", "r", "", "", 1))
    db.checkpoint_step(other, StepRecord(1, "other run", "", "", "", 9))
    db.record_context_event(run, ContextEvent.assembled(1, "carried=0 stubbed=0", 50))
    db.record_context_event(run, ContextEvent.reread(2, "a.txt: changed"))
    db.record_context_event(run, ContextEvent(3, "stalled", None))
    db.record_context_event(run, ContextEvent(3, "served", ""))
    db.record_context_event(other, ContextEvent.reread(1, "other"))
    # excluded by definition: memory, MCP, sandbox, stamps
    db.memory_put(ws, "k", "v", run, 1)
    db.record_mcp(run, McpEvent.connected("fs", "stdio").with_millis(5))
    db.record_sandbox_event(SandboxEvent.exec(run, 1, "b", "/tmp/xyz rustc"))
    db.finish_run(run, "success")

    expected = (
        'step 1 | tokens 120 | decision read a.txt | tool_call {"path":"a.txt"} | prompt Goal: x'
        " | result [read a.txt]\nhello | world\n"
        "step 1 | tokens 1 | decision late row for step 1 | tool_call  | prompt  | result r\n"
        "step 2 | tokens 5 | decision retry 1 after error | tool_call  | prompt Goal: x"
        " | result rate limited\n"
        "step 2 | tokens 80 | decision wrote out.txt | tool_call write:{} | prompt P2 | result ok\n"
        "step 3 | tokens 0 | decision verified | tool_call  | prompt  | result \n"
        "context 1 | assembled | carried=0 stubbed=0\n"
        "context 2 | reread | a.txt: changed\n"
        "context 3 | stalled | \n"
        "context 3 | served | \n"
    )
    assert db.canonical_trace(run) == expected
    assert db.canonical_trace(db.start_run("empty", "f")) == ""


def _paged_run(db: Store) -> tuple[int, list[StepRecord]]:
    """A run of 28 rows over 20 step numbers: retries sharing a number, rows written out of
    step order, and rows of another run in between."""
    run = db.start_run("paged", "f")
    noise = db.start_run("noise", "f")
    written: list[StepRecord] = []
    order = list(range(1, 21))
    order[4], order[9] = order[9], order[4]  # 10 is written before 5
    copies = {7: 4, 13: 2, 15: 2, 18: 2, 19: 2, 20: 2}
    for n in order:
        for c in range(copies.get(n, 1)):
            rec = StepRecord(n, f"s{n} try {c}", f"r{n}.{c}", "", "", n * 10 + c)
            written.append(rec)
            (db.checkpoint_step if c == copies.get(n, 1) - 1 else db.record)(run, rec)
        db.record(noise, StepRecord(n, "noise", "", "", "", 0))
    assert len(written) == 28
    # upstream's order: step number, then insertion
    expected = [r for _, r in sorted(enumerate(written), key=lambda p: (p[1].step, p[0]))]
    # a page of 7 ends inside a group of equal step numbers (rows 7 and 8 are both step 7)
    assert expected[6].step == expected[7].step == 7
    return run, expected


@pytest.mark.parametrize("page", [7, 1, 4, 28, 1000])
def test_iter_steps_streams_in_order_across_page_boundaries(db: Store, page: int) -> None:
    run, expected = _paged_run(db)
    streamed = list(db.iter_steps(run, page=page))
    assert streamed == expected
    assert db.steps(run) == expected


def test_iter_steps_agrees_with_upstreams_sql_and_is_lazy(db: Store, db_target: str) -> None:
    run, expected = _paged_run(db)
    rows = up.read_at(db_target, "steps", run)
    assert [StepRecord(*r) for r in rows] == expected
    it = db.iter_steps(run, page=7)
    first = [next(it) for _ in range(7)]
    # between pages no transaction is held: another writer commits, the rest still streams
    db.checkpoint_step(run, StepRecord(21, "after first page", "", "", "", 0))
    rest = list(it)
    assert first + rest[:-1] == expected
    assert rest[-1].decision == "after first page"


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


def test_context_reported_fills_only_the_assembled_row(db: Store) -> None:
    run = db.start_run("g", "f")
    db.record_context_event(run, ContextEvent.assembled(1, "d", 100))
    db.record_context_event(run, ContextEvent.reread(1, "a.txt"))
    db.record_context_event(run, ContextEvent.assembled(2, "d", 50))
    db.record_context_reported(run, 1, 130)
    assert [astuple(e) for e in db.context_events(run)] == [
        (1, "assembled", "d", 100, 130),
        (1, "reread", "a.txt", None, None),
        (2, "assembled", "d", 50, None),
    ]


def test_find_spawn_adopts_the_first_child_for_parent_step_and_goal(db: Store) -> None:
    parent = db.start_run("p", "f")
    first = db.start_child_run("sub", "f", parent, 1)
    second = db.start_child_run("sub", "f", parent, 1)
    db.record_spawn(parent, 1, first, "sub", "out.txt", "ok", None, "[]")
    db.record_spawn(parent, 1, second, "sub", "other.txt", "ok", 5, '["*.lock"]')
    found = db.find_spawn(parent, 1, "sub")
    assert found is not None
    assert (found.child_run_id, found.verify_file, found.max_steps, found.deny_write) == (
        first,
        "out.txt",
        None,
        "[]",
    )
    assert db.find_spawn(parent, 2, "sub") is None
    assert db.find_spawn(parent, 1, "SUB") is None


def test_long_memory_keys_and_nul_inside_policy_json_round_trip(db: Store, ws: str) -> None:
    """upstream (SQLite) keeps a memory key of any length, and serde escapes a NUL inside a
    policy's strings as `\\u0000`, so both are storable values, not errors."""
    run = db.start_run("g", "f")
    rnd = random.Random(7)
    # 4,000 characters that do not compress (12,000 bytes): a key, not a value
    key = "".join(chr(rnd.randrange(0x4E00, 0x9FFF)) for _ in range(4000))
    if db.backend.name == "postgresql":
        # PostgreSQL's btree behind UNIQUE(workspace, key) cannot hold it: refused, typed,
        # and nothing written.
        with pytest.raises(InvalidValueError, match="unique index"):
            db.memory_put(ws, key, "v", run, 1)
        assert db.memory_list(ws) == []
    else:
        assert db.memory_put(ws, key, "v", run, 1) == []
        entry = db.memory_get(ws, key)
        assert entry is not None and entry.key == key
        assert keys(db.memory_list(ws)) == [key]
    policy = {
        "layers": [{"name": "a\x00b", "rules": []}],
        "defaults": PERMISSIVE_POLICY["defaults"],
    }
    db.record_run_policy(run, policy)
    assert db.run_policy(run) == policy


def test_a_write_waits_for_another_writer_instead_of_failing(tmp_path: Path) -> None:
    """0.12+: a file store has a 5 s busy timeout, so a moment of contention is a short wait,
    not an error."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO runs (goal, file) VALUES ('held', 'f')")
        timer = threading.Timer(0.5, lambda: other.execute("COMMIT"))
        timer.start()
        started = time.monotonic()
        store.checkpoint_step(run, StepRecord(1, "a", "b"))
        waited = time.monotonic() - started
        timer.join()
        other.close()
        assert 0.3 <= waited < 5
        assert store.last_step(run) == 1
        assert [r for r in store.runs() if r != run] != []


def test_two_stores_on_one_database_write_concurrently(db_target: str) -> None:
    stores = [Store.open(db_target), Store.open(db_target)]
    try:
        runs = [stores[i % 2].start_run(f"writer {i}", "f") for i in range(4)]
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for step in range(1, 51):
                    stores[i % 2].checkpoint_step(runs[i], StepRecord(step, "a", "", "", "", 1))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        for run in runs:
            assert [r[0] for r in up.read_at(db_target, "steps", run)] == list(range(1, 51))
            assert len(up.read_at(db_target, "checkpoint_events", run)) == 50
    finally:
        for store in stores:
            store.close()


def test_an_in_memory_store_has_the_same_api_and_nothing_is_shared() -> None:
    first, second = Store.memory(), Store.memory()
    try:
        run = first.start_run("goal", "root")
        first.checkpoint_step(run, StepRecord(1, "act", "ok", "", "", 5))
        first.memory_put("ws", "k", "v", run, 1)
        first.finish_run(run, "success")
        summary = first.run_summary(run)
        assert summary is not None and (summary.steps, summary.tokens) == (1, 5)
        assert first.checkpoint_events(run) == [CheckpointEvent.checkpoint(run, 1)]
        first.check_resumable(run)
        assert second.runs() == [] and second.memory_list("ws") == []
    finally:
        first.close()
        second.close()


FAIL_STEP = 424_242


def _inject_failure(target: str, table: str, column: str, value: Any) -> Callable[[], None]:
    """A trigger that makes one insert into `table` fail mid-transaction, as a full disk or a
    dropped connection would; returns the function that removes it."""
    if up.is_postgres(target):
        literal = value if isinstance(value, int) else "'" + str(value) + "'"
        raw(
            target,
            f"CREATE FUNCTION hs_fail_{table}() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.{column} = {literal} THEN RAISE EXCEPTION 'injected failure'; END IF; "
            f"RETURN NEW; END $$ LANGUAGE plpgsql",
        )
        raw(
            target,
            f"CREATE TRIGGER hs_fail_{table} BEFORE INSERT ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION hs_fail_{table}()",
        )
        return lambda: raw(target, f"DROP FUNCTION hs_fail_{table}() CASCADE")
    literal = value if isinstance(value, int) else "'" + str(value) + "'"
    raw(
        target,
        f"CREATE TRIGGER hs_fail_{table} BEFORE INSERT ON {table} WHEN NEW.{column} = {literal} "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
    )
    return lambda: raw(target, f"DROP TRIGGER hs_fail_{table}")


def test_a_failure_between_the_two_inserts_of_a_checkpoint_leaves_neither(
    db: Store, db_target: str, ws: str
) -> None:
    run = db.start_run("goal", "root")
    db.checkpoint_step(run, StepRecord(1, "act", "ok", "", "", 1))
    remove = _inject_failure(db_target, "checkpoint_events", "step", FAIL_STEP)
    try:
        before = counts(db_target)
        # the steps row goes in first, then the checkpoint event fails
        with pytest.raises(StoreError):
            db.checkpoint_step(run, StepRecord(FAIL_STEP, "act", "ok", "", "", 5))
        assert counts(db_target) == before
        with pytest.raises(StoreError):
            db.checkpoint_steps(run, [StepRecord(2, "a", "b"), StepRecord(FAIL_STEP, "a", "b")])
        assert counts(db_target) == before
        with pytest.raises(StoreError), db.transaction():
            db.memory_put(ws, "k", "v", run, 2)
            db.checkpoint_step(run, StepRecord(2, "act", "ok", "", "", 5))
            db.checkpoint_step(run, StepRecord(FAIL_STEP, "act", "ok", "", "", 5))
        assert counts(db_target) == before
        # the Store is not left inside a dead transaction: the next checkpoint commits
        db.checkpoint_step(run, StepRecord(2, "act", "ok", "", "", 5))
    finally:
        remove()
    assert [r[0] for r in up.read_at(db_target, "steps", run)] == [1, 2]
    assert [r[1] for r in up.read_at(db_target, "checkpoint_events", run)] == [1, 2]
    assert db.memory_list(ws) == []


def test_a_batch_larger_than_one_statement_is_still_one_transaction_in_order(
    db: Store, db_target: str
) -> None:
    """`checkpoint_steps` splits a long batch into statements of `BULK_CHUNK` steps (on
    PostgreSQL); the split must not show: every row in batch order, or none of them."""
    run = db.start_run("goal", "root")
    size = 2 * BULK_CHUNK + 7
    batch = [
        StepRecord(n, "act", f"r{n}", f"p{n}", "" if n % 3 else f"t{n}", n)
        for n in range(1, size + 1)
    ]
    remove = _inject_failure(db_target, "steps", "step", size)  # in the last chunk
    try:
        before = counts(db_target)
        with pytest.raises(StoreError, match="injected failure"):
            db.checkpoint_steps(run, batch)
        assert counts(db_target) == before
    finally:
        remove()
    assert db.checkpoint_steps(run, batch) == size
    assert db.steps(run) == batch
    steps = raw(db_target, f"SELECT step FROM steps WHERE run_id = {run} ORDER BY id")
    events = raw(
        db_target, f"SELECT step, kind FROM checkpoint_events WHERE run_id = {run} ORDER BY id"
    )
    assert [r[0] for r in steps] == list(range(1, size + 1))  # ids follow the batch order
    assert events == [(n, "checkpoint") for n in range(1, size + 1)]
    assert db.spent_tokens(run) == size * (size + 1) // 2


def test_a_batch_of_large_steps_is_split_by_size_and_still_one_transaction(
    db: Store, db_target: str
) -> None:
    """Steps whose text outgrows one statement's budget (PostgreSQL refuses a message over
    1 GB) are split by size as well as by count, still all-or-nothing."""
    big = BULK_CHUNK_CHARS // 2 - 10
    batch = [StepRecord(n, "act", "", chr(0x41 + n) * big, "", n) for n in (1, 2, 3)]
    run = db.start_run("goal", "root")
    assert [len(c) for c in bulk_chunks([step_values(run, r) for r in batch])] == [2, 1]
    remove = _inject_failure(db_target, "steps", "step", 3)  # in the second statement
    try:
        before = counts(db_target)
        with pytest.raises(StoreError, match="injected failure"):
            db.checkpoint_steps(run, batch)
        assert counts(db_target) == before
    finally:
        remove()
    assert db.checkpoint_steps(run, batch) == 3
    assert db.steps(run) == batch


def test_a_failure_inside_an_observation_batch_records_none_of_it(
    db: Store, db_target: str
) -> None:
    run = db.start_run("goal", "root")
    remove = _inject_failure(db_target, "ledger_observations", "text", "boom")
    try:
        batch = [
            Observation(1, ObsKind.READ, "a.txt", "fine"),
            Observation(1, ObsKind.GREP, "x", "fine too"),
            Observation(1, ObsKind.ERROR, None, "boom"),
        ]
        with pytest.raises(StoreError):
            db.record_observations(run, batch)
        assert db.observations(run) == []
        db.record_observations(run, batch[:2])
    finally:
        remove()
    assert db.observations(run) == batch[:2]


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


def test_read_only_open_reads_and_never_writes(tmp_path: Path, fixture_copy: Any) -> None:
    """`Store.open(read_only=True)`: reads a 0.13-or-newer store as it is (even a read-only
    file), refuses an older one, and turns every write into `StoreAccessError`."""
    from harness_store.errors import StoreAccessError

    path = fixture_copy("io-harness-0.22.0/interrupted")
    path.chmod(0o444)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with Store.open(path, read_only=True) as store:
        assert store.tree_run_ids(1) == [1, 2, 3]
        assert store.spent_tokens_tree(1) == 400
        with pytest.raises(StoreAccessError):
            store.start_run("g", "f")
        with pytest.raises(StoreAccessError):
            store.checkpoint_step(1, StepRecord(9, "a", "b"))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest

    old = tmp_path / "old.sqlite3"
    legacy.build_born_at(old, "0.5")
    digest = hashlib.sha256(old.read_bytes()).hexdigest()
    with pytest.raises(UpgradeRequiredError, match="harness-store upgrade"):
        Store.open(old, read_only=True)
    assert hashlib.sha256(old.read_bytes()).hexdigest() == digest


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
