"""`TraceView.header` and `TraceView.entries`: a run's whole trace read back as one, every
kind of entry in trace order, windows of steps, a reply turn's tokens, a missing run, and a
read ended early — on both backends, over a `Store`."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from harness_store import Store
from harness_store import models as m
from harness_store.errors import InvalidValueError, RunNotFoundError
from harness_store.records import (
    Edit,
    PolicyEvent,
    ProviderCall,
    RunHeader,
    StepRecord,
    TraceEntry,
    Usage,
)
from harness_store.store.trace_view import TraceView


@pytest.fixture
def store_api() -> Any:
    """A trace view reads over a `Store` (the command's), so these tests drive `Store` only;
    `AsyncStore` has no view of its own."""
    return Store


def a_run_of_every_kind(store: Any) -> int:
    """A run whose steps 1 and 2 each have every kind of entry recorded at them."""
    run: int = store.start_run("trace me", "a.rs")
    for n in (1, 2):
        store.record_event(run, PolicyEvent.refusal(n, "write", f"secret{n}"))
        request = store.put_pending(run, n, "shell", f"rm {n}", "why")
        if n == 1:
            store.resolve_pending(request, "approved")
        usage = Usage(prompt_tokens=10, completion_tokens=n, total_tokens=10 + n)
        store.record_provider_call(run, ProviderCall(n, 1, "p", "m", usage, 5))
        attempt = store.open_attempt(run, n, "deploy", "indeterminate")
        store.close_attempt(attempt)
        store.record_edit(run, Edit(n, "write", f"f{n}.rs", 3, 1))
        store.checkpoint_step(run, StepRecord(n, f"decide {n}", f"result {n}", tokens=100 * n))
        store.put_gate_attempt(run, n, "test", "passed", "")
    return run


def test_every_kind_of_entry_comes_back_in_trace_order(store: Store) -> None:
    run = a_run_of_every_kind(store)
    entries = list(TraceView(store).entries(run))
    kinds = ["policy", "approval", "call", "attempt", "edit", "step", "gate", "checkpoint"]
    assert [(e.step, e.kind) for e in entries] == [(n, k) for n in (1, 2) for k in kinds]
    first = {e.kind: e for e in entries if e.step == 1}
    assert first["step"].tokens == 100 and first["step"].fields["result"] == "result 1"
    assert first["step"].fields["decision"] == "decide 1"
    assert first["policy"].fields["kind"] == "refusal"
    assert first["policy"].fields["target"] == "secret1"
    assert first["approval"].fields["resolved"] == "approved"
    assert first["approval"].seq == first["approval"].fields["request_id"]
    assert first["call"].fields["total_tokens"] == 11 and first["call"].tokens is None
    assert first["attempt"].fields["tool"] == "deploy"
    assert first["attempt"].fields["completed_at"] is not None
    assert first["edit"].fields == {
        "tool": "write", "path": "f1.rs", "lines_added": 3, "lines_removed": 1
    }  # fmt: skip
    assert first["gate"].fields == {"phase": "test", "outcome": "passed", "detail": ""}
    assert first["checkpoint"].fields == {"kind": "checkpoint", "detail": None}
    assert all(isinstance(e, TraceEntry) for e in entries)
    assert sum(e.tokens or 0 for e in entries) == store.spent_tokens(run) == 300


@pytest.mark.slow_on("postgresql")
def test_a_window_of_steps_and_results_left_out(store: Store) -> None:
    run = a_run_of_every_kind(store)
    second = list(TraceView(store).entries(run, first_step=2))
    assert {e.step for e in second} == {2} and len(second) == 8
    assert list(TraceView(store).entries(run, last_step=1)) == list(
        TraceView(store).entries(run, first_step=1, last_step=1)
    )
    assert list(TraceView(store).entries(run, first_step=3)) == []
    lean = [e for e in TraceView(store).entries(run, results=False) if e.kind == "step"]
    assert [set(e.fields) for e in lean] == [{"decision", "tool_call", "tokens"}] * 2


def test_the_header_is_the_runs_row(store: Store) -> None:
    run = a_run_of_every_kind(store)
    child = store.start_child_run("a child", "b.rs", run, 1)
    store.finish_run(run, "success")
    header = TraceView(store).header(child)
    assert isinstance(header, RunHeader)
    assert (header.run_id, header.parent_run_id, header.goal) == (child, run, "a child")
    parent = TraceView(store).header(run)
    assert (parent.status, parent.outcome) == ("completed", "success")
    assert parent.started_at and parent.parent_run_id is None


def test_a_missing_run_is_refused_and_bad_steps_are_typed(store: Store) -> None:
    with pytest.raises(RunNotFoundError):
        TraceView(store).header(404)
    with pytest.raises(RunNotFoundError):
        list(TraceView(store).entries(404))
    run = store.start_run("empty", "a.rs")
    assert list(TraceView(store).entries(run)) == []
    with pytest.raises(InvalidValueError):
        list(TraceView(store).entries(run, first_step=2**63))


@pytest.mark.slow_on("postgresql")
def test_a_reply_turns_calls_carry_its_tokens(store_target: str) -> None:
    """A reply turn (0.37) commits no steps: `spent_tokens` counts its provider calls, and so
    do its trace entries."""
    with Store.open(store_target) as store:
        run = store.start_run("a reply", "a.md")
        for n, total in ((0, 15), (0, 20)):
            store.record_provider_call(run, ProviderCall(n, 1, "p", "m", Usage(total_tokens=total)))
        store.record_provider_call(run, ProviderCall(0, 2, "p", "m", None, 3, failure="timeout"))
        with store.write_engine.begin() as conn:  # what upstream 0.37+ writes for a reply turn
            conn.execute(update(m.Run).where(m.Run.id == run).values(turn_kind="reply"))
        entries = list(TraceView(store).entries(run))
        assert [e.tokens for e in entries] == [15, 20, None]
        assert sum(e.tokens or 0 for e in entries) == store.spent_tokens(run) == 35


def test_a_read_ended_early_closes_its_cursors_inside_the_read(store_target: str) -> None:
    """Closing the generator after one entry ends every table's cursor while the snapshot is
    still open; the store goes on reading and closes cleanly."""
    with Store.open(store_target) as store:
        run = a_run_of_every_kind(store)
        entries = TraceView(store).entries(run)
        assert next(entries).kind == "policy"
        entries.close()
        assert len(list(TraceView(store).entries(run))) == 16


def test_the_whole_trace_is_one_snapshot(store_target: str) -> None:
    """Steps another Store commits while a trace is being read are not in it (every table's
    cursor reads the snapshot the trace began with); the next trace has them."""
    with Store.open(store_target) as store, Store.open(store_target) as writer:
        run = a_run_of_every_kind(store)
        entries = TraceView(store).entries(run)
        assert next(entries).kind == "policy"
        writer.checkpoint_steps(run, [StepRecord(n, "later", "r") for n in (1, 2, 3)])
        assert [e for e in entries if e.fields.get("decision") == "later"] == []
        later = [e for e in TraceView(store).entries(run) if e.fields.get("decision") == "later"]
        assert [e.step for e in later] == [1, 2, 3]
