"""The trace on both backends: a step and its checkpoint event committed together (or neither),
batches that stay one transaction however they are split, `canonical_trace` as upstream's exact
text, `iter_steps` paging, and `context_reported`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple
from typing import Any

import pytest
from support import upstream_sql as up
from support.upstream_sql import counts, raw

from harness_store import (
    ContextEvent,
    McpEvent,
    Observation,
    ObsKind,
    SandboxEvent,
    StepRecord,
    Store,
)
from harness_store.errors import StoreError
from harness_store.store.runs import BULK_CHUNK, BULK_CHUNK_CHARS, bulk_chunks, step_values


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
