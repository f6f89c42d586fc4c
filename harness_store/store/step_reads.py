"""Point reads on a cached path: the reads a harness makes per step or per resume, compiled
once per dialect for every Store of the process and run as one pre-compiled statement on the
driver (`Connector.driver_read`: on SQLite no transaction around it, on PostgreSQL one
autocommitted round trip on a kept connection), with no SQLAlchemy statement built, cached
or executed per call.

Each read is named; its statement is built by a function of the store's shape (whether it
has a column a read-only Store on an older store may lack) and compiled the first time a Store
of that dialect asks for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BindParameter,
    Engine,
    Select,
    bindparam,
    case,
    func,
    literal_column,
    null,
    select,
)
from sqlalchemy.sql import ClauseElement

from .. import models as m
from ..connector.driver import DriverStatement
from ..formats import REPLY_TURN

RUN_ID: BindParameter[Any] = bindparam("run_id")
"""The run a point read is about."""

RunKey = int | BindParameter[Any]
"""A run id, or the parameter of a statement compiled once (`RUN_ID`)."""

Key = tuple[str, str, str, str, tuple[Any, ...]]
"""(dialect name, driver, paramstyle, read, the shape it was built for)."""

_COMPILED: dict[Key, DriverStatement] = {}


def compiled(
    engine: Engine, name: str, build: Callable[..., ClauseElement], *shape: Any
) -> DriverStatement:
    """The read `name` built by `build(*shape)`, compiled once per dialect and shape."""
    dialect = engine.dialect
    key = (dialect.name, dialect.driver, dialect.paramstyle, name, shape)
    statement = _COMPILED.get(key)
    if statement is None:
        statement = _COMPILED[key] = DriverStatement.compile(build(*shape), engine)
    return statement


def resumable(format_sql: str, has_turns: bool) -> Select[Any]:
    """One row for `check_resumable`: the checkpoint format (`format_sql`, the backend's
    expression for it), and the run's turn kind, status and id (NULL when there is no run)."""
    r = m.Run
    mine = r.id == RUN_ID
    turn: Any = select(r.turn_kind).where(mine).scalar_subquery() if has_turns else null()
    return select(
        literal_column(format_sql),
        turn,
        select(r.status).where(mine).scalar_subquery(),
        select(r.id).where(mine).scalar_subquery(),
    )


def resume_point(format_sql: str, has_turns: bool) -> ClauseElement:
    """`resumable`'s row with the run's last step and spent tokens after it (`last_step`'s
    and `spent_tokens`' statements as scalar subqueries): a resume's three reads as one."""
    return resumable(format_sql, has_turns).add_columns(
        last_step_of(RUN_ID).scalar_subquery(),
        tokens_of(RUN_ID, has_turns=has_turns).scalar_subquery(),
    )


def last_step_of(run_id: RunKey) -> Select[int]:
    """`MAX(step)` of a run, 0 without steps: its progress (retries share a step number)."""
    return select(func.coalesce(func.max(m.Step.step), 0)).where(m.Step.run_id == run_id)


def tokens_of(run_id: RunKey, *, has_turns: bool = True) -> Select[int]:
    """What a run spent, as upstream counts it since 0.37: a reply turn (`turn_kind` 'reply')
    commits no steps, so its provider calls' `total_tokens`; any other run, `SUM(tokens)` of
    its steps. 0 when there is nothing to sum. A store from before 0.37 (`has_turns` false,
    read-only) has no reply turns: its steps."""
    by_steps = select(func.coalesce(func.sum(m.Step.tokens), 0)).where(m.Step.run_id == run_id)
    if not has_turns:
        return by_steps
    calls = m.ProviderCall
    reply = select(m.Run.turn_kind).where(m.Run.id == run_id).scalar_subquery() == REPLY_TURN
    by_calls = select(func.coalesce(func.sum(calls.total_tokens), 0)).where(calls.run_id == run_id)
    return select(case((reply, by_calls.scalar_subquery()), else_=by_steps.scalar_subquery()))


def step_record(last: bool) -> ClauseElement:
    """A run's step record by number (`:step`): the last row written under it, which `steps`
    lists last (a retry's row comes before its checkpoint's); or with `last` the record of the
    run's highest step number. One seek on the (run_id, step, id) index, one row."""
    s = m.Step
    statement = select(s.step, s.decision, s.result, s.prompt, s.tool_call, s.tokens).where(
        s.run_id == RUN_ID
    )
    if not last:
        statement = statement.where(s.step == bindparam("step"))
    # `LIMIT 1` as it is, not a parameter: a prepared statement's generic plan (psycopg
    # prepares a statement run often) cannot see a parameter's value, which the raw read's
    # plan is made with.
    return statement.order_by(s.step.desc(), s.id.desc()).limit(literal_column("1"))


def run_lease(now_sql: str) -> ClauseElement:
    """A run's lease and the database's clock now (`now_sql`, the backend's expression)."""
    r = m.RunLease
    return select(
        r.owner, r.generation, r.acquired_at, r.renewed_at, r.ttl_secs, literal_column(now_sql)
    ).where(r.run_id == RUN_ID)


def memory_entry(has_kinds: bool) -> ClauseElement:
    """One memory entry by workspace and key (before 0.30 no kind or pin: NULLs)."""
    mem = m.Memory
    kinds: tuple[Any, Any] = (mem.kind, mem.pinned) if has_kinds else (null(), null())
    return select(mem.key, mem.value, mem.run_id, mem.step, mem.created_at, *kinds).where(
        mem.workspace == bindparam("workspace"), mem.key == bindparam("key")
    )


def run_status() -> ClauseElement:
    """A run's status (no row when there is no run)."""
    return select(m.Run.status).where(m.Run.id == RUN_ID)


def run_summary() -> ClauseElement:
    """A finished run's summary row."""
    o = m.RunOutcome
    return select(
        o.run_id, o.outcome, o.success, o.steps, o.tokens, o.duration_ms, o.finished_at
    ).where(o.run_id == RUN_ID)
