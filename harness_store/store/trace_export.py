"""The trace as an exporter reads it: runs with their stamps, and each run's rows with their
row ids and stamps (which upstream's read methods leave out), a page at a time.

`TraceExport` reads them over a Store, through the Store's named ways to the database: it is
the package's OTLP exporter's (`harness_store.otel`), not a part of the Store's API, which is
upstream's. Nothing here knows about OpenTelemetry: `harness_store.otel` turns these rows into
spans. The other trace readers are `trace` (upstream's methods) and `trace_view` (the whole
trace as `harness-store trace` prints it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Select, func, or_, select

from .. import models as m
from ..stamps import Stamp
from .arguments import checked_arguments
from .release_tables import OlderStoreMixin
from .unreadable import check_integers, integer_columns

T = TypeVar("T")

RUN_PAGE = 500
"""Runs read per query when the exporter walks the store."""

ROW_PAGE = 2000
"""Steps read per query when the exporter walks one run."""


class SpanRun(NamedTuple):
    """A run as a span needs it: its tree, goal, lifecycle and stamps."""

    id: int
    parent_run_id: int | None
    depth: int
    goal: str
    file: str
    status: str
    outcome: str | None
    provider: str | None
    started_at: str | None
    finished_at: str | None
    duration_ms: int | None
    success: bool | None
    turn_kind: str | None
    session_id: int | None
    spawn_step: int | None
    spawn_name: str | None


class SpanStep(NamedTuple):
    """One `steps` row (a trace entry) with its row id."""

    id: int
    step: int
    decision: str
    result: str
    prompt: str
    tool_call: str
    tokens: int


class SpanProviderCall(NamedTuple):
    """One `provider_calls` row with its row id and stamp (`at`: when it was recorded)."""

    id: int
    step: int
    attempt: int
    provider: str
    model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    server_tool_requests: int | None
    latency_ms: int
    ttft_ms: int | None
    finish_reason: str | None
    failure: str | None
    at: str | None


class SpanToolAttempt(NamedTuple):
    """One `tool_attempts` row: a client-side tool call begun and how it ended."""

    id: int
    step: int
    tool: str
    started_at: str | None
    completed_at: str | None
    resolution: str | None


class SpanServerToolCall(NamedTuple):
    """One `server_tool_calls` row: a tool the provider ran on its side."""

    id: int
    step: int
    provider: str
    tool: str
    error: str | None
    ran_at: str | None


class SpanMcpEvent(NamedTuple):
    """One `mcp_events` row: an MCP server's start, call or failure."""

    id: int
    step: int
    kind: str
    server: str
    tool: str | None
    ok: bool | None
    millis: int | None
    detail: str | None


class SpanEventRow(NamedTuple):
    """A row that becomes a span event: its table, row id, step, and its fields by name."""

    table: str
    id: int
    step: int
    fields: dict[str, str | int]


EVENT_TABLES: dict[str, tuple[type[m.Base], tuple[str, ...]]] = {
    "policy_events": (
        m.PolicyEvent,
        ("kind", "act", "target", "rule", "layer", "decision", "source", "performed"),
    ),
    "pending_approvals": (m.PendingApproval, ("act", "target", "resolved")),
    "sandbox_events": (m.SandboxEvent, ("kind", "backend", "detail")),
    "checkpoint_events": (m.CheckpointEvent, ("kind", "detail")),
    "agent_events": (m.AgentEvent, ("kind", "child_run_id", "detail", "tokens", "remaining")),
    "gate_attempts": (m.GateAttempt, ("phase", "outcome", "detail", "at")),
}
"""The tables whose rows become span events of their run, with the columns each carries."""


@dataclass
class RunRows:
    """One run's rows, as the Store reads them (steps are streamed, the rest are lists)."""

    run: SpanRun
    root_run_id: int
    steps: Iterable[SpanStep]
    provider_calls: list[SpanProviderCall]
    tool_attempts: list[SpanToolAttempt]
    server_tool_calls: list[SpanServerToolCall]
    mcp_events: list[SpanMcpEvent]
    event_rows: list[SpanEventRow]
    children: list[int] = field(default_factory=list)


def _runs_query() -> Select[Any]:
    r, o = m.table_of(m.Run), m.table_of(m.RunOutcome)
    t, s = m.table_of(m.SessionTurn), m.table_of(m.Spawn)
    session = select(func.min(t.c.session_id)).where(t.c.run_id == r.c.id).scalar_subquery()
    spawn = select(s.c.step, s.c.as_name).where(s.c.child_run_id == r.c.id).order_by(s.c.id)
    spawn_step = spawn.with_only_columns(s.c.step).limit(1).scalar_subquery()
    spawn_name = spawn.with_only_columns(s.c.as_name).limit(1).scalar_subquery()
    return (
        select(
            r.c.id,
            r.c.parent_run_id,
            r.c.depth,
            r.c.goal,
            r.c.file,
            r.c.status,
            func.coalesce(o.c.outcome, r.c.outcome),
            r.c.provider,
            r.c.started_at,
            o.c.finished_at,
            o.c.duration_ms,
            o.c.success,
            r.c.turn_kind,
            session,
            spawn_step,
            spawn_name,
        )
        .select_from(r.outerjoin(o, o.c.run_id == r.c.id))
        .order_by(r.c.id)
    )


def _span_run(*row: Any) -> SpanRun:
    values = list(row)
    values[11] = None if values[11] is None else bool(values[11])
    values[15] = values[15] or None
    return SpanRun(*values)


def _event_maker(table: str, names: tuple[str, ...]) -> Callable[..., SpanEventRow]:
    def make(i: int, step: int, *values: Any) -> SpanEventRow:
        fields = {n: v for n, v in zip(names, values, strict=True) if v is not None}
        return SpanEventRow(table, int(i), int(step), fields)

    return make


@checked_arguments
class TraceExport:
    """The reads of a trace exporter over `store` (see the module): `runs`, `run`, and each
    run's rows with ids and stamps; every argument checked as the Store's are."""

    def __init__(self, store: OlderStoreMixin) -> None:
        self.store = store

    def _select(self, statement: Select[Any], make: Callable[..., T]) -> list[T]:
        """The statement's rows, each made into a record, in one read. On a store of an older
        release that lacks a table or column the statement reads, `UpgradeRequiredError`
        (an export needs the whole newest shape; nothing is read). A value of an integer
        column that is none (SQLite keeps text or Infinity there) is `UnreadableValueError`
        naming its row: each statement's first column is its row's id."""
        self.store._refuse_missing(statement)
        with self.store._read() as conn:
            rows = conn.execute(statement).all()
        check_integers(rows, integer_columns(statement.selected_columns), 0)
        return [make(*row) for row in rows]

    def runs(
        self,
        *,
        after: int = 0,
        limit: int = RUN_PAGE,
        since: str | None = None,
        run_ids: list[int] | None = None,
    ) -> list[SpanRun]:
        """Runs with id above `after`, in id order, at most `limit`; only those started (or
        finished) at or after `since` (a time, compared as an instant whatever the stamps'
        spelling: `harness_store.stamps`), or among `run_ids`."""
        r, o = m.table_of(m.Run), m.table_of(m.RunOutcome)
        statement = _runs_query().where(r.c.id > after).limit(limit)
        if since is not None:
            start = Stamp.parse(since, "since")
            statement = statement.where(
                or_(start.at_or_after(r.c.started_at), start.at_or_after(o.c.finished_at))
            )
        if run_ids is not None:
            statement = statement.where(r.c.id.in_(run_ids))
        return self._select(statement, _span_run)

    def run(self, run_id: int) -> SpanRun | None:
        """One run as `runs` reads it, or None."""
        rows = self._select(_runs_query().where(m.table_of(m.Run).c.id == run_id), _span_run)
        return rows[0] if rows else None

    def steps(self, run_id: int, *, page: int = ROW_PAGE) -> Iterator[SpanStep]:
        """The run's `steps` rows in row order, read `page` rows at a time."""
        s = m.table_of(m.Step)
        after = 0
        while True:
            statement = (
                select(
                    s.c.id,
                    s.c.step,
                    s.c.decision,
                    s.c.result,
                    s.c.prompt,
                    s.c.tool_call,
                    s.c.tokens,
                )
                .where(s.c.run_id == run_id, s.c.id > after)
                .order_by(s.c.id)
                .limit(page)
            )
            rows = self._select(statement, SpanStep)
            yield from rows
            if len(rows) < page:
                return
            after = rows[-1].id

    def provider_calls(
        self, run_id: int, *, after: int = 0, limit: int | None = None
    ) -> list[SpanProviderCall]:
        """The run's provider calls in row order, with their ids and stamps: those with id
        above `after`, at most `limit` (an exporter streaming a long run reads a page at a
        time)."""
        c = m.table_of(m.ProviderCall)
        columns = [c.c[name] for name in SpanProviderCall._fields]
        statement = select(*columns).where(c.c.run_id == run_id, c.c.id > after).order_by(c.c.id)
        if limit is not None:
            statement = statement.limit(limit)
        return self._select(statement, SpanProviderCall)

    def tool_attempts(self, run_id: int) -> list[SpanToolAttempt]:
        """The run's tool attempts (open and closed) in row order."""
        a = m.table_of(m.ToolAttempt)
        columns = [a.c[name] for name in SpanToolAttempt._fields]
        return self._select(
            select(*columns).where(a.c.run_id == run_id).order_by(a.c.id), SpanToolAttempt
        )

    def server_tool_calls(self, run_id: int) -> list[SpanServerToolCall]:
        """The run's provider-side tool calls in row order."""
        c = m.table_of(m.ServerToolCall)
        columns = [c.c[name] for name in SpanServerToolCall._fields]
        return self._select(
            select(*columns).where(c.c.run_id == run_id).order_by(c.c.id), SpanServerToolCall
        )

    def mcp_events(self, run_id: int) -> list[SpanMcpEvent]:
        """The run's MCP events in row order."""
        e = m.table_of(m.McpEvent)
        columns = [e.c[name] for name in SpanMcpEvent._fields]

        def make(*row: Any) -> SpanMcpEvent:
            values = list(row)
            values[5] = None if values[5] is None else bool(values[5])
            return SpanMcpEvent(*values)

        return self._select(select(*columns).where(e.c.run_id == run_id).order_by(e.c.id), make)

    def event_rows(self, run_id: int) -> list[SpanEventRow]:
        """The run's policy decisions, approvals, sandbox, checkpoint, agent and gate rows, each
        table in row order, tables in `EVENT_TABLES` order."""
        out: list[SpanEventRow] = []
        for table, (model, names) in EVENT_TABLES.items():
            t = m.table_of(model)
            statement = (
                select(t.c.id, t.c.step, *(t.c[n] for n in names))
                .where(t.c.run_id == run_id)
                .order_by(t.c.id)
            )

            out.extend(self._select(statement, _event_maker(table, names)))
        return out
