"""A run's whole trace read back as one: its header and every step and event in order.

What `harness-store trace` prints: `TraceView` reads it over a Store, through the Store's
named ways to the database, so the command shows what the Store's package reads. It is the
command's, not a part of the Store's API (upstream's per-table reads: `steps`,
`provider_calls`, `policy_events`, …). The other trace readers are `trace` (upstream's methods)
and `trace_export` (the rows an exporter reads, with their ids and stamps). A view holds:
the steps merged with the events recorded at them (policy refusals and decisions, approvals,
provider calls, tool attempts, edits, gate attempts, checkpoints), within an optional window
of steps. Each table is read by its own cursor, a page at a time, all inside one read
transaction: one snapshot for the whole trace, and memory holds a page per table however
long the run.

A window of a few steps (both ends given, at most `SHORT_WINDOW` steps: what an agent or a
viewer reads around one step) is read first as one statement, every table's rows and the
run's own row in one `UNION ALL` ordered as the trace is, on the point reads' path (compiled
once, one round trip, no cursor held); only when it holds more than `TRACE_PAGE` rows is it
read again the long way, so memory stays bounded either way.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ClauseElement,
    Select,
    bindparam,
    cast,
    literal_column,
    null,
    select,
    union_all,
)

from .. import models as m
from ..errors import RunNotFoundError
from ..formats import REPLY_TURN, i64
from ..records import RunHeader, TraceEntry
from .arguments import checked_arguments
from .release_tables import OlderStoreMixin
from .step_reads import RUN_ID
from .unreadable import check_integers, integer_columns

TRACE_PAGE = 1000
"""Rows fetched at a time from each of the trace's cursors."""

SHORT_WINDOW = 64
"""The most steps a window may span to be read first as one statement (see the module)."""

ENTRY_RANK = {
    "policy": 0,
    "approval": 1,
    "call": 2,
    "attempt": 3,
    "edit": 4,
    "step": 5,
    "gate": 6,
    "checkpoint": 7,
}
"""Within one step number: what happened during the step (the policy's word, approvals, the
provider's answer, the tool attempts and edits it led to), then the step, then its gate and
its checkpoint."""

Made = Callable[..., tuple[str, int | None, dict[str, Any]]]
"""Turns a row's columns (after its id and step) into (kind, tokens, fields)."""


@checked_arguments
class TraceView:
    """A run's whole trace over `store` (see the module): its `header` and its `entries`."""

    def __init__(self, store: OlderStoreMixin) -> None:
        self.store = store

    def header(self, run_id: int) -> RunHeader:
        """The run's own row, as its trace is headed; `RunNotFoundError` when there is none."""
        r = m.Run
        started = r.started_at if not self.store._lacks("runs", "started_at") else None
        parent = r.parent_run_id if not self.store._lacks("runs", "parent_run_id") else None
        columns = [r.id, parent, r.goal, r.status, r.outcome, started]
        statement = select(*(c if c is not None else null() for c in columns))
        with self.store._read() as conn:
            row = conn.execute(statement.where(r.id == i64(run_id, "run_id"))).first()
        if row is None:
            raise RunNotFoundError(f"no run with id {run_id} in the store")
        return RunHeader(*row)

    def entries(
        self,
        run_id: int,
        *,
        first_step: int | None = None,
        last_step: int | None = None,
        results: bool = True,
    ) -> Generator[TraceEntry, None, None]:
        """The run's steps merged with its events, in trace order (by step, then `ENTRY_RANK`,
        then row id), from `first_step` to `last_step` inclusive (None leaves that end open),
        read as one snapshot a page at a time (close the generator to end the read early).
        `results=False` leaves each step's result out
        of its fields (a listing that does not show them need not read them). A table the
        store's release does not have yet contributes nothing. `RunNotFoundError` when the
        run does not exist (at the first entry taken). Until the generator is exhausted or
        closed its read stays open for this thread: a Store read made meanwhile
        joins its snapshot, and a write is refused."""
        run_id = i64(run_id, "run_id")
        window = (
            None if first_step is None else i64(first_step, "first_step"),
            None if last_step is None else i64(last_step, "last_step"),
        )
        values = {"run_id": run_id, "first_step": window[0], "last_step": window[1]}
        if window[0] is not None and window[1] is not None and window[1] - window[0] < SHORT_WINDOW:
            short = self._short_window(values, results)
            if short is not None:
                yield from short
                return
        ends = (window[0] is not None, window[1] is not None)
        with self.store._read() as conn:
            found = conn.execute(_run_kind(self.store._lacks("runs", "turn_kind")), values).first()
            if found is None:
                raise RunNotFoundError(f"no run with id {run_id} in the store")
            reply = found[0] == REPLY_TURN

            def stream(
                model: Any, names: list[str], make: Made
            ) -> Generator[TraceEntry, None, None]:
                statement = _table_read(model, tuple(names), ends)
                integers = integer_columns(statement.selected_columns)
                for rows in self.store._stream(conn, statement, TRACE_PAGE, values):
                    check_integers(rows, integers, 0)  # a step that is none: named, typed
                    for seq, step, *rest in rows:
                        kind, tokens, fields = make(*rest)
                        yield TraceEntry(step, kind, seq, tokens, fields)

            streams = [
                stream(model, names, make)
                for model, names, make in _tables(reply, results)
                if not self.store._lacks(model.__tablename__)
            ]
            try:
                yield from heapq.merge(*streams, key=_order)
            finally:  # each cursor closed inside the read, however early the caller stops
                for each in streams:
                    each.close()

    def _short_window(self, values: dict[str, Any], results: bool) -> list[TraceEntry] | None:
        """The window's entries read as one statement (see the module), or None when it holds
        more than `TRACE_PAGE` rows (then the window is read the long way)."""
        present = tuple(
            model.__tablename__
            for model, _, _ in _tables(False, results)
            if not self.store._lacks(model.__tablename__)
        )
        shape = (present, results, self.store._lacks("runs", "turn_kind"))
        rows = self.store._point("trace_window", _window_read, *shape, **values)
        if not rows or rows[0][0] != RUN_ROW:
            raise RunNotFoundError(f"no run with id {values['run_id']} in the store")
        if len(rows) > TRACE_PAGE + 1:
            return None
        reply = rows[0][WINDOW_FIXED - 1] == REPLY_TURN
        tables = {model.__tablename__: (model, names, make)
                  for model, names, make in _tables(reply, results)}  # fmt: skip
        layout = _window_layout(present, results)
        by_rank: dict[int, list[Any]] = {}
        for row in rows[1:]:
            by_rank.setdefault(row[0], []).append(row)
        for rank, ranked in by_rank.items():
            check_integers(ranked, layout[rank].integers, 2)  # a stored value no read takes
        entries = []
        for row in rows[1:]:
            place = layout[row[0]]
            kind, tokens, fields = tables[place.table][2](*row[place.start : place.end])
            entries.append(TraceEntry(row[1], kind, row[2], tokens, fields))
        return entries


def _order(entry: TraceEntry) -> tuple[int, int, int]:
    return (entry.step, ENTRY_RANK[entry.kind], entry.seq)


ENTRY_RANK_OF = {
    "policy_events": ENTRY_RANK["policy"],
    "pending_approvals": ENTRY_RANK["approval"],
    "provider_calls": ENTRY_RANK["call"],
    "tool_attempts": ENTRY_RANK["attempt"],
    "edits": ENTRY_RANK["edit"],
    "steps": ENTRY_RANK["step"],
    "gate_attempts": ENTRY_RANK["gate"],
    "checkpoint_events": ENTRY_RANK["checkpoint"],
}
"""Each trace table's `ENTRY_RANK`, by table name."""

_BUILT: dict[tuple[Any, ...], Any] = {}
"""The trace's statements, built once (a few per table: its columns and the window's ends)."""

FIRST_STEP: BindParameter[Any] = bindparam("first_step")
LAST_STEP: BindParameter[Any] = bindparam("last_step")


def _run_kind(lacks_kind: bool) -> Select[Any]:
    """The run's turn kind (NULL before 0.37), one row when the run exists."""
    key = ("runs", lacks_kind)
    statement = _BUILT.get(key)
    if statement is None:
        kind = null() if lacks_kind else m.Run.turn_kind
        statement = _BUILT[key] = select(kind).where(m.Run.id == RUN_ID)
    return statement


def _table_read(model: Any, names: tuple[str, ...], ends: tuple[bool, bool]) -> Select[Any]:
    """One table's rows of the run (`run_id`), `id`, `step` and `names`, in step and id order,
    within the window's given ends (`first_step`, `last_step`): built once per shape, and so
    compiled once (the values are bound per call)."""
    key = (model, names, ends)
    statement = _BUILT.get(key)
    if statement is None:
        columns = [getattr(model, name) for name in names]
        statement = select(model.id, model.step, *columns).where(model.run_id == RUN_ID)
        if ends[0]:
            statement = statement.where(model.step >= FIRST_STEP)
        if ends[1]:
            statement = statement.where(model.step <= LAST_STEP)
        statement = _BUILT[key] = statement.order_by(model.step, model.id)
    return statement


def _tables(reply: bool, results: bool) -> list[tuple[Any, list[str], Made]]:
    """Each table of the trace: its model, the columns read after `id` and `step`, and how a
    row becomes an entry. In a reply turn the provider calls carry the run's tokens, as
    `spent_tokens` counts them; otherwise the steps do."""

    policy_columns = ["kind", "act", "target", "rule", "layer", "decision", "source", "performed"]

    def policy(*row: Any) -> tuple[str, None, dict[str, Any]]:
        return "policy", None, dict(zip(policy_columns, row, strict=True))

    def approval(*row: Any) -> tuple[str, None, dict[str, Any]]:
        request_id, *rest = row
        names = ("act", "target", "content", "resolved")
        return "approval", None, {"request_id": request_id, **dict(zip(names, rest, strict=True))}

    def step(decision: str, tool_call: str, tokens: int, *result: str) -> Any:
        fields = {"decision": decision, "tool_call": tool_call, "tokens": tokens}
        if results:
            fields["result"] = result[0]
        return "step", None if reply else tokens, fields

    def call(provider: str, model: str | None, total: int | None, latency: int,
             failure: str | None) -> Any:  # fmt: skip
        fields = {"provider": provider, "model": model, "total_tokens": total,
                  "latency_ms": latency, "failure": failure}  # fmt: skip
        return "call", total if reply else None, fields

    def attempt(tool: str, completed: str | None, resolution: str | None) -> Any:
        return "attempt", None, {"tool": tool, "completed_at": completed, "resolution": resolution}

    def edit(tool: str, path: str, added: int, removed: int) -> Any:
        fields = {"tool": tool, "path": path, "lines_added": added, "lines_removed": removed}
        return "edit", None, fields

    def gate(phase: str, outcome: str, detail: str) -> Any:
        return "gate", None, {"phase": phase, "outcome": outcome, "detail": detail}

    def checkpoint(kind: str, detail: str | None) -> Any:
        return "checkpoint", None, {"kind": kind, "detail": detail}

    step_columns = ["decision", "tool_call", "tokens", *(["result"] if results else [])]
    return [
        (m.PolicyEvent, policy_columns, policy),
        (m.PendingApproval, ["id", "act", "target", "content", "resolved"], approval),
        (m.Step, step_columns, step),
        (m.CheckpointEvent, ["kind", "detail"], checkpoint),
        (m.ProviderCall, ["provider", "model", "total_tokens", "latency_ms", "failure"], call),
        (m.ToolAttempt, ["tool", "completed_at", "resolution"], attempt),
        (m.Edit, ["tool", "path", "lines_added", "lines_removed"], edit),
        (m.GateAttempt, ["phase", "outcome", "detail"], gate),
    ]


RUN_ROW = -1
"""The rank (and step) of the run's own row in a short window's statement: first of all."""

WINDOW_FIXED = 4
"""A short window's row: rank, step, id, the run's turn kind (the run's own row only), then
each table's columns in turn, NULL but in the rows of their own table."""


@dataclass(frozen=True)
class _Place:
    """Where one table's columns are in a short window's row, and its integer columns there
    (as `unreadable.integer_columns` gives them)."""

    table: str
    start: int
    end: int
    integers: list[tuple[int, str, str, str]]


_LAYOUTS: dict[tuple[tuple[str, ...], bool], dict[int, _Place]] = {}


def _window_layout(present: tuple[str, ...], results: bool) -> dict[int, _Place]:
    """Each present table's place in a short window's row, by its rank in the statement."""
    key = (present, results)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = {}
        start = WINDOW_FIXED
        for model, names, _ in _tables(False, results):
            table = model.__tablename__
            if table not in present:
                continue
            columns = [model.__table__.c[n] for n in ("id", "step", *names)]
            at = [2, 1, *range(start, start + len(names))]  # where each column is in the row
            integers = [(at[i], t, c, k) for i, t, c, k in integer_columns(columns)]
            layout[ENTRY_RANK_OF[table]] = _Place(table, start, start + len(names), integers)
            start += len(names)
        _LAYOUTS[key] = layout
    return layout


def _window_read(present: tuple[str, ...], results: bool, lacks_kind: bool) -> ClauseElement:
    """A short window as one statement: the run's own row (rank `RUN_ROW`, its turn kind),
    then every present table's rows of the window, each padded with typed NULLs to the
    others' columns, in trace order (step, `ENTRY_RANK`, id); at most `TRACE_PAGE` + 2 rows,
    so a window holding more is known by its length."""
    tables = [(model, names) for model, names, _ in _tables(False, results)
              if model.__tablename__ in present]  # fmt: skip
    slots = [getattr(model, name) for model, names in tables for name in names]
    r = m.Run

    def arm(rank: int, step: Any, seq: Any, kind: Any, own: Any, where: list[Any]) -> Any:
        fixed = [literal_column(str(rank), BigInteger), cast(step, BigInteger), seq, kind]
        padded = [c if c.class_ is own else cast(null(), c.type) for c in slots]
        labelled = [c.label(f"c{i}") for i, c in enumerate([*fixed, *padded])]
        return select(*labelled).where(*where)

    kind = cast(null(), r.turn_kind.type) if lacks_kind else r.turn_kind
    no_kind = cast(null(), r.turn_kind.type)
    arms = [arm(RUN_ROW, literal_column(str(RUN_ROW)), r.id, kind, r, [r.id == RUN_ID])]
    for model, _ in tables:
        window = [model.run_id == RUN_ID, model.step >= FIRST_STEP, model.step <= LAST_STEP]
        rank = ENTRY_RANK_OF[model.__tablename__]
        arms.append(arm(rank, model.step, model.id, no_kind, model, window))
    union = union_all(*arms).subquery()
    ordered = select(union).order_by(union.c.c1, union.c.c0, union.c.c2)  # step, rank, id
    return ordered.limit(literal_column(str(TRACE_PAGE + 2)))
