"""Every Store write naming a run, raced against an archiving `prune_runs` of that run on
PostgreSQL: the write is in the store, or in the archive, or was refused with a typed error —
never acknowledged and then in neither.

The race is made, not hoped for: the test holds the archive's write lock, so the prune stops
inside its batch's transaction (its runs locked, about to write the archive and commit) and
stays there while the write runs; only once the write has returned, or is seen waiting on a
lock the prune holds, is the archive let go. The writes are enumerated from the Store's marks
(every `@writes` method with a parameter naming a run, or a row of a run's tables by its id),
so a new one fails `test_every_run_keyed_write_is_raced` until it is given a call here.
"""

from __future__ import annotations

import inspect
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, or_, select, text
from support.policies import PERMISSIVE_POLICY

import harness_store as hs
from harness_store import Store
from harness_store.errors import StoreError
from harness_store.models import Base
from harness_store.records import (
    AgentEvent,
    AssistantTurn,
    CheckpointEvent,
    Citation,
    ContextEvent,
    Edit,
    McpEvent,
    Observation,
    ObsKind,
    PolicyEvent,
    ProviderCall,
    RunEvent,
    SandboxEvent,
    ServerToolCall,
    Snapshot,
    StepRecord,
    TodoItem,
    TodoState,
)
from harness_store.store.marks import MARK

Call = Callable[[Store, int], object]
Setup = Callable[[Store, int], None]


def _started(store: Store, run: int) -> None:
    store.record_handle_started(run, 1, 7, "npm run dev")


def _attempt(store: Store, run: int) -> int:
    attempt = store.open_attempt(run, 1, "shell", "indeterminate")
    assert attempt is not None
    return attempt


RACED: dict[str, tuple[Call, Setup | None]] = {
    "acquire_lease": (lambda s, r: s.acquire_lease(r, 600), None),
    "checkpoint_step": (lambda s, r: s.checkpoint_step(r, StepRecord(9, "late", "ok")), None),
    "checkpoint_steps": (lambda s, r: s.checkpoint_steps(r, [StepRecord(9, "late", "ok")]), None),
    "close_attempt": (lambda s, r: s.close_attempt(s.open_attempts(r)[0].id), _attempt),
    "dequeue_agent": (
        lambda s, r: s.dequeue_agent(r, 1, "queued"),
        lambda s, r: bool(s.enqueue_agent(r, 1, "queued", 1)),
    ),
    "enqueue_agent": (lambda s, r: s.enqueue_agent(r, 9, "late", 1), None),
    "finish_run": (lambda s, r: s.finish_run(r, "failed"), None),
    "memory_forget": (
        lambda s, r: s.memory_forget("/ws/race", f"f{r}", r, 9),
        lambda s, r: bool(s.memory_put("/ws/race", f"f{r}", "v", r, 1)),
    ),
    "memory_put": (lambda s, r: s.memory_put("/ws/race", f"k{r}", "late", r, 9), None),
    "memory_write": (lambda s, r: s.memory_write("/ws/race", f"w{r}", "late", r, 9), None),
    "memory_write_with": (
        lambda s, r: s.memory_write_with(
            "/ws/race", f"x{r}", "late", r, 9, "fact", hs.MemoryLimits()
        ),
        None,
    ),
    "open_attempt": (lambda s, r: s.open_attempt(r, 9, "shell", "indeterminate"), None),
    "orphan_live_handles": (lambda s, r: s.orphan_live_handles(r, "late"), _started),
    "put_event": (lambda s, r: s.put_event(RunEvent.new(r, 9, "stalled")), None),
    "put_gate_attempt": (lambda s, r: s.put_gate_attempt(r, 9, "verify", "passed", "late"), None),
    "put_pending": (lambda s, r: s.put_pending(r, 9, "exec", "late"), None),
    "put_plan": (lambda s, r: s.put_plan(r, 9, hs.Plan([hs.PlanStep.new("late")])), None),
    "put_question": (lambda s, r: s.put_question(r, 9, hs.Question("late?")), None),
    "put_summary": (lambda s, r: s.put_summary(r, 9, 1, "late", 1), None),
    "read_messages": (
        lambda s, r: s.read_messages(r),
        lambda s, r: bool(s.send_message(r, r, "self", 1, "unread")),
    ),
    "record": (lambda s, r: s.record(r, StepRecord(9, "late", "ok")), None),
    "record_agent_event": (lambda s, r: s.record_agent_event(AgentEvent(r, 9, "late")), None),
    "record_checkpoint_event": (
        lambda s, r: s.record_checkpoint_event(CheckpointEvent(r, 9, "late")),
        None,
    ),
    "record_citations": (lambda s, r: s.record_citations(r, 9, [Citation("https://x")]), None),
    "record_context_event": (
        lambda s, r: s.record_context_event(r, ContextEvent(9, "late")),
        None,
    ),
    "record_context_reported": (
        lambda s, r: s.record_context_reported(r, 9, 123),
        lambda s, r: s.record_context_event(r, ContextEvent(9, "assembled", None, 100)),
    ),
    "record_edit": (lambda s, r: s.record_edit(r, Edit(9, "shell", "late.txt", 1, 0)), None),
    "record_event": (lambda s, r: s.record_event(r, PolicyEvent(9, "x", "exec", "late")), None),
    "record_handle_ended": (
        lambda s, r: s.record_handle_ended(r, 7, "exited", 0, None),
        _started,
    ),
    "record_handle_output": (lambda s, r: s.record_handle_output(r, 1, 7, "late\n"), _started),
    "record_handle_pids": (lambda s, r: s.record_handle_pids(r, 7, [4242]), _started),
    "record_handle_started": (lambda s, r: s.record_handle_started(r, 9, 8, "late"), None),
    "record_mcp": (lambda s, r: s.record_mcp(r, McpEvent(9, "late", "srv")), None),
    "record_memory_recall": (
        lambda s, r: s.record_memory_recall(r, 9, "/ws/race", ["k"]),
        None,
    ),
    "record_observations": (
        lambda s, r: s.record_observations(r, [Observation(9, ObsKind.MESSAGE, None, "late")]),
        None,
    ),
    "record_provider_call": (
        lambda s, r: s.record_provider_call(r, ProviderCall(9, 1, "late", "m")),
        None,
    ),
    "record_rewind": (lambda s, r: s.record_rewind(r, ["late.txt"], [], [], []), None),
    "record_run_policy": (lambda s, r: s.record_run_policy(r, PERMISSIVE_POLICY), None),
    "record_sandbox_event": (
        lambda s, r: s.record_sandbox_event(SandboxEvent(r, 9, "late")),
        None,
    ),
    "record_server_tool_calls": (
        lambda s, r: s.record_server_tool_calls(r, 9, [ServerToolCall("p", "late")]),
        None,
    ),
    "record_snapshot": (lambda s, r: s.record_snapshot(r, Snapshot(9, "late.txt", "absent")), None),
    "record_spawn": (
        lambda s, r: s.record_spawn(r, 9, r + 1000, "late", "v", "n", None, "[]"),
        None,
    ),
    "record_step_turn": (
        lambda s, r: s.record_step_turn(r, AssistantTurn.new(9, "late", [])),
        None,
    ),
    "record_turn": (
        lambda s, r: s.record_turn(s.create_session("/ws/race"), None, r, "late"),
        None,
    ),
    "resolve_attempt": (
        lambda s, r: s.resolve_attempt(s.open_attempts(r)[0].id, "rerun"),
        _attempt,
    ),
    "send_message": (lambda s, r: s.send_message(r, r, "self", 9, "late"), None),
    "set_provider": (lambda s, r: s.set_provider(r, "late"), None),
    "set_status": (lambda s, r: s.set_status(r, "failed"), None),
    "start_child_run": (lambda s, r: s.start_child_run("late", "plan.toml", r, 1), None),
    "write_todos": (lambda s, r: s.write_todos(r, [TodoItem.new("late", TodoState.ACTIVE)]), None),
}
"""Each run-keyed write, as a call on the run raced (and what it needs there first)."""

NOT_RACED = {
    "release_lease": "changes an unlapsed lease, which keeps its run out of any prune",
    "renew_lease": "changes an unlapsed lease, which keeps its run out of any prune",
    "resolve_pending": "changes an unresolved approval, which keeps its run out of any prune",
    "answer_question": "changes an unanswered question, which keeps its run out of any prune",
    "decide_plan": "changes an undecided plan, which keeps its run out of any prune",
    "stage_step_turn": "holds the turn in the handle until the step's checkpoint writes it",
    "forget_staged_turn": "drops a turn the handle holds: nothing in the store",
}
"""The writes naming a run that a prune of the run can never meet, and why."""


def run_keyed_writes() -> set[str]:
    """Every `@writes` method of the Store with a parameter naming a run (or a record that
    carries one), or a row of a run's tables by its id (not a session's or a turn's)."""
    found = set()
    for name, method in inspect.getmembers(Store, inspect.isfunction):
        access = getattr(method, MARK, None)
        if access is None or access.kind != "write":
            continue
        for parameter in list(inspect.signature(method).parameters.values())[1:]:
            record = getattr(hs, str(parameter.annotation), None)
            carries = is_dataclass(record) and "run_id" in {f.name for f in fields(record)}
            names_row = parameter.name.endswith("_id") and not {"session", "turn"} & set(
                parameter.name.split("_")
            )
            if carries or names_row:
                found.add(name)
    return found


def test_every_run_keyed_write_is_raced() -> None:
    assert run_keyed_writes() == set(RACED) | set(NOT_RACED)
    assert not set(RACED) & set(NOT_RACED)


RUN_COLUMNS = ("id", "run_id", "parent_run_id", "to_run_id")


def rows_of(engine: Any, run: int) -> Counter[tuple[str, str]]:
    """Every row naming `run` in any table of the store behind `engine` (the `runs` row by
    its id, any other by a run column), as text."""
    found: Counter[tuple[str, str]] = Counter()
    with engine.connect() as conn:
        for name, t in Base.metadata.tables.items():
            keys = [t.c[c] for c in RUN_COLUMNS if c in t.c and (c != "id" or name == "runs")]
            if not keys:
                continue
            for row in conn.execute(select(t).where(or_(*(k == run for k in keys)))):
                found[(name, repr(tuple(row)))] += 1
    return found


def named(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


def session_state(pg: Any, name: str) -> list[tuple[str | None, str | None, float]]:
    """(state, wait event type, seconds in that state) of each session named `name`."""
    statement = text(
        "SELECT state, wait_event_type, EXTRACT(EPOCH FROM clock_timestamp() - state_change) "
        "FROM pg_stat_activity WHERE application_name = :name"
    )
    with pg.connect() as conn:
        return [(s, w, float(t or 0)) for s, w, t in conn.execute(statement, {"name": name})]


def until(condition: Callable[[], bool], what: str, deadline: float = 60) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, f"never {what}"
        time.sleep(0.01)


class Outcome:
    """What a call in a thread did: returned, or raised `error`."""

    def __init__(self, work: Callable[[], object]) -> None:
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self.thread.start()

    def _run(self, work: Callable[[], object]) -> None:
        try:
            work()
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()


def race(pg: Any, pruner: Store, archive: Path, work: Callable[[], object]) -> tuple[Outcome, bool]:
    """Run `work` while `pruner` holds a batch's transaction open before its archive commits
    (the test holds the archive's write lock); let the archive go once `work` has ended or
    is waiting on a lock. What `work` did, and whether it waited."""
    hold = sqlite3.connect(archive, isolation_level=None)
    hold.execute("BEGIN IMMEDIATE")
    try:
        prune = Outcome(lambda: pruner.prune_runs(before="9999-01-01", archive=archive))

        def waiting_on_archive() -> bool:
            assert not prune.done.is_set(), f"the prune ended first: {prune.error!r}"
            return any(
                s == "idle in transaction" and t > 0.2
                for s, _, t in session_state(pg, "hs_race_pruner")
            )

        until(waiting_on_archive, "saw the prune wait for its archive")
        write = Outcome(work)
        waited = False

        def ended_or_waiting() -> bool:
            nonlocal waited
            waited = any(w == "Lock" for _, w, _ in session_state(pg, "hs_race_writer"))
            return write.done.is_set() or waited

        until(ended_or_waiting, "saw the write end or wait")
    finally:
        hold.rollback()
        hold.close()
    prune.thread.join(120)
    write.thread.join(120)
    assert prune.done.is_set() and prune.error is None, prune.error
    assert write.done.is_set()
    return write, waited


def test_a_write_racing_an_archiving_prune_is_kept_or_refused(pg_url: str, tmp_path: Path) -> None:
    archive = tmp_path / "archive.sqlite3"
    Store.open(archive, backup=False).close()
    Store.open(pg_url, backup=False).close()
    pg, kept = create_engine(pg_url), create_engine(f"sqlite:///{archive}")
    lost = {}
    with (
        Store.open(pg_url, backup=False) as store,
        Store.open(named(pg_url, "hs_race_pruner"), backup=False) as pruner,
        Store.open(named(pg_url, "hs_race_writer"), backup=False) as writer,
    ):

        def finished_run(method: str, setup: Setup | None) -> int:
            run = store.start_run(f"raced by {method}", "plan.toml")
            store.checkpoint_step(run, StepRecord(1, "decide", "ok", tokens=1))
            if setup is not None:
                setup(store, run)
            store.finish_run(run, "success")
            return run

        # Unraced, each call leaves a trace among its run's rows (so a loss would show).
        for method, (call, setup) in RACED.items():
            control = finished_run(method, setup)
            unraced = rows_of(pg, control)
            call(writer, control)
            assert rows_of(pg, control) != unraced, f"{method} changed nothing unraced"
        pruner.prune_runs(before="9999-01-01")  # the controls go, before the races

        for method, (call, setup) in RACED.items():
            run = finished_run(method, setup)
            before = rows_of(pg, run) + rows_of(kept, run)
            write, waited = race(pg, pruner, archive, lambda: call(writer, run))  # noqa: B023
            after = rows_of(pg, run) + rows_of(kept, run)
            if write.error is not None:
                # Refused: a typed error, and nothing of the write anywhere.
                assert isinstance(write.error, StoreError), (method, write.error)
                assert after == before, method
            elif after == before and not waited:
                # Acknowledged before the prune's deletion took the rows it wrote, yet in
                # neither the store nor the archive. (A write that waited for the prune's
                # lock is ordered after it: a change of a row the prune took changes nothing.)
                lost[method] = sorted({name for name, _ in before})
    pg.dispose()
    kept.dispose()
    assert not lost, f"acknowledged, then in neither store nor archive: {sorted(lost)}"
