"""`harness-store runs`: one line a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text
from sqlalchemy import Connection, func, select

from .. import models as m

if TYPE_CHECKING:
    pass
from .app import EPILOG, DbArg, JsonOpt, app
from .output import emit_json, emit_table, human_duration, short_time, stderr_console
from .reader import Reader, open_reader

# --- runs --------------------------------------------------------------------------------


def step_totals(conn: Connection, run_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Per run: (highest step, total tokens) from its steps, for the given runs only."""
    s = m.Step
    totals: dict[int, tuple[int, int]] = {}
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        statement = (
            select(s.run_id, func.max(s.step), func.sum(s.tokens))
            .where(s.run_id.in_(chunk))
            .group_by(s.run_id)
        )
        for run_id, steps, tokens in conn.execute(statement):
            totals[int(run_id)] = (int(steps or 0), int(tokens or 0))
    return totals


def run_rows(reader: Reader, status: str | None, limit: int | None) -> list[dict[str, Any]]:
    """The runs, newest first, with their step and token totals and recorded duration."""
    r, o = m.Run, m.RunOutcome
    statement = (
        select(
            r.id,
            r.parent_run_id,
            r.depth,
            r.status,
            r.outcome,
            r.started_at,
            o.duration_ms,
            o.success,
            r.goal,
        )
        .outerjoin(o, o.run_id == r.id)
        .order_by(r.id.desc())
    )
    if status is not None:
        statement = statement.where(r.status == status)
    if limit is not None:
        statement = statement.limit(limit)
    with reader.connection() as conn:
        rows = conn.execute(statement).all()
        totals = step_totals(conn, [int(row[0]) for row in rows])
    return [
        {
            "run_id": row[0],
            "parent_run_id": row[1],
            "depth": row[2],
            "status": row[3],
            "outcome": row[4],
            "steps": totals.get(row[0], (0, 0))[0],
            "tokens": totals.get(row[0], (0, 0))[1],
            "started_at": row[5],
            "duration_ms": row[6],
            "success": None if row[7] is None else bool(row[7]),
            "goal": row[8],
        }
        for row in rows
    ]


@app.command("runs", epilog=EPILOG)
def runs_command(
    db: DbArg,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help="Only runs with this status: running, paused, completed, failed.",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, metavar="N", help="At most N runs.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """One line a run, newest first: id, parent, status, outcome, steps, tokens, started,
    duration (recorded for runs finished by 0.12+), goal. Read-only."""
    with open_reader(db) as reader:
        rows = run_rows(reader, status, limit)
    if as_json:
        emit_json(rows)
        return
    if not rows:
        stderr_console().print(Text("no runs" + (f" with status {status}" if status else "")))
        return
    emit_table(
        [
            ("id", "right"),
            ("parent", "right"),
            ("status", "left"),
            ("outcome", "left"),
            ("steps", "right"),
            ("tokens", "right"),
            ("started", "left"),
            ("duration", "right"),
            ("goal", "left"),
        ],
        [
            (
                row["run_id"],
                row["parent_run_id"],
                row["status"],
                row["outcome"],
                row["steps"],
                f"{row['tokens']:,}",
                short_time(row["started_at"]),
                human_duration(row["duration_ms"]),
                row["goal"],
            )
            for row in rows
        ],
    )
