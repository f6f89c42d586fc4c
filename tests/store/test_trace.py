"""The trace on both backends: a step and its checkpoint event committed together (or neither),
batches that stay one transaction however they are split, `canonical_trace` as upstream's exact
text, `iter_steps` paging, and `context_reported`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import astuple
from typing import Any

import pytest
from sqlalchemy import event, select, update
from support import upstream_sql as up
from support.asyncfacade import BlockingAsyncStore
from support.compilations import compilations
from support.pg_proxy import PgProxy
from support.rows import count, execute
from support.upstream_sql import counts, raw

from harness_store import (
    AssistantTurn,
    Citation,
    ContextEvent,
    Edit,
    GateOutcome,
    McpEvent,
    Observation,
    ObsKind,
    ResumeError,
    SandboxEvent,
    ServerToolCall,
    Snapshot,
    StepRecord,
    Store,
    ToolCall,
    ToolRecovery,
)
from harness_store import models as m
from harness_store.errors import InvalidValueError, StoreError
from harness_store.records.trace import render_hunk
from harness_store.store.checkpoints import BULK_CHUNK, BULK_CHUNK_CHARS, bulk_chunks
from harness_store.store.runs import step_values


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


def refused_whole(db: Store, target: str, run: int, batch: list[StepRecord], fail_at: int) -> None:
    """`checkpoint_steps(run, batch)` with the insert of step `fail_at` made to fail: the error
    reaches the caller and no row of the batch is left anywhere."""
    remove = _inject_failure(target, "steps", "step", fail_at)
    try:
        before = counts(target)
        with pytest.raises(StoreError, match="injected failure"):
            db.checkpoint_steps(run, batch)
        assert counts(target) == before
    finally:
        remove()


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
    refused_whole(db, db_target, run, batch, size)  # fails in the last chunk
    assert db.checkpoint_steps(run, batch) == size
    assert db.steps(run) == batch
    steps = raw(db_target, f"SELECT step FROM steps WHERE run_id = {run} ORDER BY id")
    events = raw(
        db_target, f"SELECT step, kind FROM checkpoint_events WHERE run_id = {run} ORDER BY id"
    )
    assert [r[0] for r in steps] == list(range(1, size + 1))  # ids follow the batch order
    assert events == [(n, "checkpoint") for n in range(1, size + 1)]
    assert db.spent_tokens(run) == size * (size + 1) // 2


@pytest.mark.slow_on("postgresql")
def test_a_batch_of_large_steps_is_split_by_size_and_still_one_transaction(
    db: Store, db_target: str
) -> None:
    """Steps whose text outgrows one statement's budget (PostgreSQL refuses a message over
    1 GB) are split by size as well as by count, still all-or-nothing."""
    big = BULK_CHUNK_CHARS // 2 - 10
    batch = [StepRecord(n, "act", "", chr(0x41 + n) * big, "", n) for n in (1, 2, 3)]
    run = db.start_run("goal", "root")
    assert [len(c) for c in bulk_chunks([step_values(run, r) for r in batch])] == [2, 1]
    refused_whole(db, db_target, run, batch, 3)  # fails in the second statement
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


def test_one_step_is_read_by_number_and_the_last_one_as_a_resuming_agent_reads_it(
    store: Store, store_target: str
) -> None:
    run, other, fresh = (store.start_run(g, "f") for g in ("run", "other", "fresh"))
    first = StepRecord(1, "read", "ok", "prompt 1", '{"path":"a"}', 10)
    # the largest tokens the run's total leaves room for (10 + this + 30 = 2⁶³−1)
    second = StepRecord(2, "édit 🦀", "", "", "", 2**63 - 1 - 40)
    store.checkpoint_steps(run, [first, second])
    # a retry's row under step 3, written by the driver as upstream's `record` does, before
    # the checkpoint that reuses the number
    raw(
        store_target,
        "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
        "VALUES (?, 3, 'retry', 'timeout', '', '', 0)",
        run,
    )
    third = StepRecord(3, "write", "done", "prompt 3", "{}", 30)
    store.checkpoint_step(run, third)
    store.checkpoint_step(other, StepRecord(9, "elsewhere", "", "", "", 1))

    assert [store.step(run, n) for n in (1, 2, 3)] == [first, second, third]
    assert store.step(run, 4) is None
    assert store.step(run, 9) is None, "never another run's step"
    assert store.step(99_999, 1) is None
    assert store.last_step_record(run) == third
    assert store.last_step_record(other) == StepRecord(9, "elsewhere", "", "", "", 1)
    assert store.last_step_record(fresh) is None
    assert store.last_step_record(99_999) is None
    # as `steps` lists them: for each number, the last record listed under it
    listed = {record.step: record for record in store.steps(run)}
    assert all(store.step(run, n) == record for n, record in listed.items())
    assert store.last_step_record(run) == listed[store.last_step(run)]
    with pytest.raises(InvalidValueError):
        store.step(run, "3")  # type: ignore[arg-type]


@contextmanager
def sent_statements(store: Store, proxy: PgProxy | None) -> Iterator[Callable[[], int]]:
    """How many statements `store` sent its database in the block: on SQLite those SQLite ran
    on the Store's connection, on PostgreSQL the statement messages that crossed `proxy`."""
    if proxy is not None:
        with proxy.counting() as sent:
            yield lambda: proxy.statements(sent)
        return
    seen: list[str] = []
    raw_connection = store._raw
    raw_connection.set_trace_callback(seen.append)
    try:
        yield lambda: len(seen)
    finally:
        raw_connection.set_trace_callback(None)


@pytest.mark.parametrize("api", ["Store", "AsyncStore"])
def test_a_step_point_read_is_one_statement_compiled_once(
    store_target: str, new_store: Any, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    new_store.place(store_target)
    proxy = PgProxy(store_target) if "://" in store_target else None
    opened: Any = Store if api == "Store" else BlockingAsyncStore
    try:
        with opened.open(proxy.url if proxy else store_target) as store:
            run = store.start_run("goal", "f")
            store.checkpoint_steps(run, [StepRecord(n, f"d{n}", "r") for n in (1, 2, 3)])
            assert store.step(run, 1) == StepRecord(1, "d1", "r")  # the first compiles it
            assert store.last_step_record(run) == StepRecord(3, "d3", "r")
            executed: list[str] = []
            engine = store.engine
            event.listen(engine, "before_cursor_execute", lambda *a: executed.append(a[2]))
            reads = [
                (lambda: store.step(run, 2), StepRecord(2, "d2", "r")),
                (lambda: store.last_step_record(run), StepRecord(3, "d3", "r")),
            ]
            with compilations(monkeypatch) as compiled:
                for _ in range(20):
                    for read, expected in reads:
                        if api == "AsyncStore":  # its runner's own work is no statement of it
                            assert read() == expected
                            continue
                        with sent_statements(store, proxy) as sent:
                            assert read() == expected
                        assert sent() == 1
            assert compiled == [], "nothing is compiled per call"
            assert executed == [], "nor executed through SQLAlchemy"
    finally:
        if proxy is not None:
            proxy.close()
