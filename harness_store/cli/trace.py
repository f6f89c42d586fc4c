"""`harness-store trace`: a run's steps and events in order."""

from __future__ import annotations

import heapq
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Annotated, Any

import typer
from sqlalchemy import Connection, select

from ..errors import (
    RunNotFoundError,
)
from .app import MAX_INT, DbArg, JsonOpt, RunArg, app
from .output import Column, JsonArray, emit_table, fit_cell, note, plural, stdout_console, visible
from .reader import Reader, Replaced, open_reader
from .trace_rows import NEWER_RANKS, newer_entries

# --- trace -------------------------------------------------------------------------------

ENTRY_RANK = {"policy": 0, "approval": 1, **NEWER_RANKS, "step": 5, "checkpoint": 7}
"""Within one step number: what happened during the step, then the step, then its checkpoint."""


@dataclass(frozen=True)
class Entry:
    """One line of a trace: a step row or an event, with the fields JSON shows."""

    step: int
    type: str
    seq: int
    tokens: int | None
    summary: str
    fields: Mapping[str, Any]

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.step, ENTRY_RANK[self.type], self.seq)

    def document(self) -> dict[str, Any]:
        return {"type": self.type, "step": self.step, **self.fields}


def run_header(reader: Reader, run_id: int) -> dict[str, Any]:
    """The run's own row; `RunNotFoundError` when there is none."""
    from .. import models as m

    r = m.Run
    with reader.connection() as conn:
        row = conn.execute(
            select(r.id, r.parent_run_id, r.goal, r.status, r.outcome, r.started_at).where(
                r.id == run_id
            )
        ).first()
    if row is None:
        raise RunNotFoundError(f"no run with id {run_id} in {reader.where}")
    keys = ("run_id", "parent_run_id", "goal", "status", "outcome", "started_at")
    return dict(zip(keys, row, strict=True))


PAGE = 1000
"""Rows fetched at a time from each of the trace's cursors."""

Window = tuple[int | None, int | None]
"""First and last step of a trace, inclusive; None leaves that end open."""


def rows_of(conn: Connection, statement: Any, step: Any, window: Window) -> Iterator[Any]:
    """The rows of `statement` within the step `window`, fetched a page at a time from one
    cursor (the whole trace is one read snapshot, and memory holds one page per table)."""
    first, last = window
    if first is not None:
        statement = statement.where(step >= first)
    if last is not None:
        statement = statement.where(step <= last)
    yield from conn.execution_options(yield_per=PAGE).execute(statement)


def policy_entries(conn: Connection, run_id: int, window: Window) -> Iterator[Entry]:
    """The run's policy refusals and decisions, in trace order."""
    from .. import models as m

    p = m.PolicyEvent
    statement = (
        select(
            p.id,
            p.step,
            p.kind,
            p.act,
            p.target,
            p.rule,
            p.layer,
            p.decision,
            p.source,
            p.performed,
        )
        .where(p.run_id == run_id)
        .order_by(p.step, p.id)
    )
    for row in rows_of(conn, statement, p.step, window):
        _, step, kind, act, target, rule, layer, decision, source, performed = row
        if kind == "refusal":
            summary = f"refused {act} {target}"
            if rule:
                summary += f" (rule {rule}" + (f", layer {layer})" if layer else ")")
        else:
            summary = " ".join(filter(None, (kind, decision, "on", act, target)))
            if source:
                summary += f" by {source}"
        if performed:
            summary += f"; performed {performed}"
        fields: dict[str, Any] = {
            "kind": kind,
            "act": act,
            "target": target,
            "rule": rule,
            "layer": layer,
            "decision": decision,
            "source": source,
            "performed": performed,
        }
        yield Entry(step, "policy", row[0], None, summary, fields)


def approval_entries(conn: Connection, run_id: int, window: Window) -> Iterator[Entry]:
    """The run's approval requests, resolved or pending, in trace order."""
    from .. import models as m

    p = m.PendingApproval
    statement = (
        select(p.id, p.step, p.act, p.target, p.content, p.resolved)
        .where(p.run_id == run_id)
        .order_by(p.step, p.id)
    )
    for request_id, step, act, target, content, resolved in rows_of(
        conn, statement, p.step, window
    ):
        summary = f"approval #{request_id} {act} {target}: {resolved or 'pending'}"
        fields = {
            "request_id": request_id,
            "act": act,
            "target": target,
            "content": content,
            "resolved": resolved,
        }
        yield Entry(step, "approval", request_id, None, summary, fields)


def checkpoint_entries(conn: Connection, run_id: int, window: Window) -> Iterator[Entry]:
    """The run's checkpoint, resume and skip markers, in trace order."""
    from .. import models as m

    c = m.CheckpointEvent
    statement = (
        select(c.id, c.step, c.kind, c.detail).where(c.run_id == run_id).order_by(c.step, c.id)
    )
    for event_id, step, kind, detail in rows_of(conn, statement, c.step, window):
        summary = kind + (f": {detail}" if detail else "")
        yield Entry(step, "checkpoint", event_id, None, summary, {"kind": kind, "detail": detail})


def step_entries(
    conn: Connection, run_id: int, window: Window, *, results: bool
) -> Iterator[Entry]:
    """The run's steps within `window`; `results` adds each step's result (JSON shows it,
    the table does not)."""
    from .. import models as m

    s = m.Step
    columns = [s.id, s.step, s.decision, s.tool_call, s.tokens]
    if results:
        columns.append(s.result)
    statement = select(*columns).where(s.run_id == run_id).order_by(s.step, s.id)
    for row in rows_of(conn, statement, s.step, window):
        fields = {"decision": row[2], "tool_call": row[3], "tokens": row[4]}
        if results:
            fields["result"] = row[5]
        summary = row[2] + (f" → {row[3]}" if row[3] else "")
        yield Entry(row[1], "step", row[0], row[4], summary, fields)


def trace_entries(
    conn: Connection, run_id: int, window: Window = (None, None), *, results: bool = True
) -> Iterator[Entry]:
    """The run's steps merged with its events, in order, within `window`: four streams
    merged as they are read."""
    return heapq.merge(
        policy_entries(conn, run_id, window),
        approval_entries(conn, run_id, window),
        step_entries(conn, run_id, window, results=results),
        checkpoint_entries(conn, run_id, window),
        *newer_entries(conn, run_id, window),
        key=lambda entry: entry.key,
    )


@app.command("trace")
def trace_command(
    db: DbArg,
    run: RunArg,
    from_step: Annotated[
        int | None,
        typer.Option("--from-step", min=0, max=MAX_INT, metavar="STEP", help="Start at STEP."),
    ] = None,
    to_step: Annotated[
        int | None,
        typer.Option("--to-step", min=0, max=MAX_INT, metavar="STEP", help="End at STEP."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, max=MAX_INT, metavar="N", help="At most N entries."),
    ] = None,
    as_json: JsonOpt = False,
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="JSON Lines: the run, then one entry a line.")
    ] = False,
) -> None:
    """A run's trace in order: steps (decision, tool call, tokens), policy refusals and
    decisions, approvals (pending or resolved), checkpoint and resume events. Streamed: a run
    of a million steps starts printing at once, in constant memory. Read-only."""
    with open_reader(db) as reader, reader.connection() as conn:
        header = run_header(reader, run)
        entries: Iterator[Entry] = trace_entries(
            conn, run, (from_step, to_step), results=as_json or jsonl
        )
        if limit is not None:
            entries = islice(entries, limit)
        if as_json or jsonl:
            stream_json(header, entries, lines=jsonl, replaced=reader.replaced)
        else:
            title = (
                f"run {run}  {visible(header['status'])}  {visible(header['outcome'])}  "
                f"{visible(header['goal'])}"
            )
            console = stdout_console()
            sys.stdout.write(
                (fit_cell(title, console.width) if console.is_terminal else title) + "\n"
            )
            emit_table(
                [
                    Column("step", "right"),
                    Column("type"),
                    Column("tokens", "right"),
                    Column("what", cut=True),
                ],
                (
                    (e.step, e.type, "" if e.tokens is None else f"{e.tokens:,}", e.summary)
                    for e in entries
                ),
            )
        if reader.replaced.count:
            note(
                f"{plural(reader.replaced.count, 'value')} held bytes that are not UTF-8; "
                "they are shown replaced by U+FFFD (�)"
            )


def stream_json(
    header: dict[str, Any], entries: Iterator[Entry], *, lines: bool, replaced: Replaced
) -> None:
    """The trace as one JSON document written as it is read (entries, then the totals), or
    as JSON Lines: the run, one entry a line, then a `totals` line."""
    out = sys.stdout
    tokens = 0
    if lines:
        out.write(json.dumps({"type": "run", **header}, ensure_ascii=False) + "\n")
    else:
        out.write("{\n")
        for key, value in header.items():
            out.write(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},\n")
        out.write('  "entries": ')
    with JsonArray(lines=lines, out=out) as array:
        for entry in entries:
            if entry.tokens is not None:
                tokens += entry.tokens
            array.add(entry.document())
    totals = {"entry_count": array.count, "tokens": tokens, "invalid_utf8_values": replaced.count}
    if lines:
        out.write(json.dumps({"type": "totals", **totals}) + "\n")
    else:
        out.write(",\n" + ",\n".join(f"  {json.dumps(k)}: {v}" for k, v in totals.items()))
        out.write("\n}\n")
