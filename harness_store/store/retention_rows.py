"""What retention deletes, locks and keeps, shared by the session retention, the run prune
and the checks: the tables a run owns (`RUN_TABLES`, upstream's list) and harness_store's
per-run spend rows (`RUN_SPEND_TABLES`; both in a deletion's order: `run_owned`), the columns an
archive keeps (the facts), and the statements, in chunks of ids, that count, lock, tally and
delete runs' rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    Table,
    bindparam,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
)
from sqlalchemy.sql.sqltypes import LargeBinary, String

from .. import models as m
from ..models.spend import RUN_SPEND_TABLES, SPEND_METADATA
from ..records.runs import FINISHED_STATUSES
from .lease_rows import lease_row

RUN_TABLES: tuple[tuple[str, str], ...] = (
    ("steps", "run_id"),
    ("policy_events", "run_id"),
    ("pending_approvals", "run_id"),
    ("agent_events", "run_id"),
    ("sandbox_events", "run_id"),
    ("checkpoint_events", "run_id"),
    ("spawns", "parent_run_id"),
    ("mcp_events", "run_id"),
    ("memory_recalls", "run_id"),
    ("memory_snapshots", "run_id"),
    ("context_events", "run_id"),
    ("run_outcomes", "run_id"),
    ("run_policies", "run_id"),
    ("ledger_observations", "run_id"),
    ("provider_calls", "run_id"),
    ("edits", "run_id"),
    ("todos", "run_id"),
    ("pending_questions", "run_id"),
    ("citations", "run_id"),
    ("server_tool_calls", "run_id"),
    ("process_handles", "run_id"),
    ("handle_output", "run_id"),
    ("snapshots", "run_id"),
    ("plans", "run_id"),
    ("agent_queue", "parent_run_id"),
    ("run_events", "run_id"),
    ("rewinds", "run_id"),
    ("gate_attempts", "run_id"),
    ("summaries", "run_id"),
    ("agent_messages", "to_run_id"),
    ("run_leases", "run_id"),
    ("step_turns", "run_id"),
    ("tool_attempts", "run_id"),
)
"""Every table keyed to a run, with its key: what a session's deletion removes (upstream's
list, in upstream's order; the mailbox by recipient, both ends being in one tree)."""
SNAPSHOTS = [name for name, _ in RUN_TABLES].index("snapshots")


def run_owned(*, spend: bool) -> list[tuple[str, str]]:
    """Every table a deletion of runs takes their rows from, with its key, in the order it
    goes: `RUN_TABLES`, then harness_store's per-run spend rows (`spend`: the store has them;
    after `provider_calls`, whose delete triggers bump them), then the runs themselves."""
    kept = [(t.name, "run_id") for t in RUN_SPEND_TABLES] if spend else []
    return [*RUN_TABLES, *kept, ("runs", "id")]


_FACT_COLUMNS = frozenset(
    [
        "kind",
        "act",
        "state",
        "status",
        "outcome",
        "verdict",
        "source",
        "layer",
        "rule",
        "provider",
        "model",
        "finish_reason",
        "tool",
        "path",
        "at",
        "created_at",
        "started_at",
        "finished_at",
        "workspace",
        "turn_kind",
    ]
)
_FACT_IN_TABLE = frozenset(
    {
        ("runs", "file"),
        ("policy_events", "decision"),
        ("sessions", "root"),
        ("snapshots", "path"),
        ("edits", "path"),
        ("policy_events", "target"),
        ("ledger_observations", "target"),
        ("memory_recalls", "key"),
        ("memory_snapshots", "key"),
    }
)

CHUNK = 500
"""Ids per `IN (…)` list, well under every backend's bound-parameter limit."""


def is_fact_column(table: str, column: str) -> bool:
    """Whether an archive keeps this column: what a row is, what was decided, where and when
    — never the words (a prompt, a reply, a goal, output)."""
    return column in _FACT_COLUMNS or (table, column) in _FACT_IN_TABLE


def table(name: str) -> Table:
    """A model's table by name, or one of harness_store's spend tables (`hs_spend_*`)."""
    found = m.Base.metadata.tables.get(name)
    return found if found is not None else SPEND_METADATA.tables[name]


def text_columns(name: str) -> list[Any]:
    """A table's TEXT and BLOB columns, as upstream sizes them."""
    return [c for c in table(name).columns if isinstance(c.type, String | LargeBinary)]


def chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    for i in range(0, len(ids), CHUNK):
        yield list(ids[i : i + CHUNK])


def text_chars(columns: Sequence[Any]) -> Any:
    """`SUM(LENGTH(c))` over columns, 0 when empty."""
    total: Any = literal(0)
    for c in columns:
        total = total + func.coalesce(func.sum(func.length(c)), 0)
    return total


def nonempty(columns: Sequence[Any]) -> Any:
    return or_(*(func.coalesce(func.length(c), 0) > 0 for c in columns))


@cache
def delete_statement(name: str, key: str, *, returning: bool = False) -> Any:
    """`DELETE FROM name WHERE key IN (:ids)`, built once; `returning`, it returns every
    column of each row it deleted (what an archive receives)."""
    t = table(name)
    statement = delete(t).where(t.c[key].in_(bindparam("ids", expanding=True)))
    return statement.returning(*t.columns) if returning else statement


@cache
def tally_statement(scope: str, among: frozenset[str] | None = None) -> Any:
    """One SELECT counting the rows and text characters of every table a deletion touches,
    for the ids in the expanding parameter `ids`: the session tables (`scope` "sessions") or
    the runs and every run-keyed table ("runs"), or only those `among` them (the others
    count nothing, unread). Built once; a scalar subquery per table."""
    ids: Any = bindparam("ids", expanding=True)
    columns = []
    for name, key in tally_parts(scope):
        if among is not None and name not in among:
            continue
        t = table(name)
        columns.append(
            select(func.count()).select_from(t).where(t.c[key].in_(ids)).scalar_subquery()
        )
        cols = text_columns(name)
        chars = select(text_chars(cols)).where(t.c[key].in_(ids)) if cols else select(literal(0))
        columns.append(chars.scalar_subquery())
    return select(*columns)


def tally_parts(scope: str) -> list[tuple[str, str]]:
    """The tables `tally` counts for `scope`, with their keys, in its answer's order."""
    if scope == "sessions":
        return [("session_turns", "session_id"), ("sessions", "id")]
    return [("runs", "id"), *RUN_TABLES]


def tally(
    conn: Any, scope: str, ids: Sequence[int], among: frozenset[str] | None = None
) -> list[tuple[int, int]]:
    """(rows, characters) per table of `scope` for these ids, summed over chunks of ids;
    only the tables `among` are read (the others, known empty, count (0, 0))."""
    if not ids:
        return []
    names = [name for name, _ in tally_parts(scope)]
    read = [among is None or name in among for name in names]
    totals = [(0, 0)] * len(names)
    if not any(read):
        return totals
    statement = tally_statement(scope, among)
    for part in chunks(ids):
        row = iter(conn.execute(statement, {"ids": part}).one())
        totals = [
            (rows + int(next(row) or 0), chars + int(next(row) or 0)) if reads else (rows, chars)
            for (rows, chars), reads in zip(totals, read, strict=True)
        ]
    return totals


@cache
def filled_statement(names: tuple[str, ...]) -> Any:
    """One SELECT saying of each table whether it holds any row (`EXISTS`), built once."""
    return select(*(select(literal(1)).select_from(table(name)).exists() for name in names))


def tables_with_rows(conn: Any, names: Sequence[str]) -> frozenset[str]:
    """Which of these tables hold any row now: in a deletion's transaction, where the others
    need neither counting nor deleting from (a row written into one after this read is, as
    any written after a deletion began, kept)."""
    row = conn.execute(filled_statement(tuple(names))).one()
    return frozenset(name for name, has in zip(names, row, strict=True) if has)


def lock_runs(conn: Any, ids: Sequence[int]) -> list[int]:
    """Lock the rows of these runs until the commit and return those that exist, ascending.

    PostgreSQL: `SELECT … FOR UPDATE`, in id order (two prunes never deadlock), which waits
    for a writer holding one of them (a status change, a lease being taken, a step's foreign
    key) and makes the next such writer wait for this transaction. SQLite: the transaction
    already holds the database's write lock (`BEGIN IMMEDIATE`), so the plain read is enough.
    """
    r = table("runs")
    found: list[int] = []
    for part in chunks(sorted(ids)):
        statement = select(r.c.id).where(r.c.id.in_(part)).order_by(r.c.id).with_for_update()
        found += [int(i) for i in conn.execute(statement).scalars()]
    return found


def live_runs(conn: Any, now_sql: str, ids: Sequence[int]) -> set[int]:
    """Which of these runs retention must keep, read now (under `lock_runs` for a deletion):
    not finished (running, paused, or a status upstream reads as running), holding an
    unlapsed lease (on the database's clock), or waiting for a person (an unresolved
    approval, an unanswered question, an undecided plan)."""
    r, leases = table("runs"), table("run_leases")
    approvals, questions, plans = (
        table("pending_approvals"),
        table("pending_questions"),
        table("plans"),
    )
    live: set[int] = set()
    for part in chunks(list(ids)):
        waiting = [
            select(r.c.id).where(r.c.id.in_(part), r.c.status.not_in(FINISHED_STATUSES)),
            select(approvals.c.run_id).where(
                approvals.c.run_id.in_(part), approvals.c.resolved.is_(None)
            ),
            select(questions.c.run_id).where(
                questions.c.run_id.in_(part), questions.c.resolved == 0
            ),
            select(plans.c.run_id).where(plans.c.run_id.in_(part), plans.c.resolved == 0),
        ]
        for statement in waiting:
            live.update(int(i) for i in conn.execute(statement).scalars())
        held = select(
            leases.c.run_id,
            leases.c.owner,
            leases.c.generation,
            leases.c.acquired_at,
            leases.c.renewed_at,
            leases.c.ttl_secs,
            literal_column(now_sql),
        ).where(leases.c.run_id.in_(part))
        for row in conn.execute(held):
            if not lease_row(int(row[0]), row[1:6], row[6]).expired:
                live.add(int(row[0]))
    return live
