"""`harness-store trace`: a run's steps and events in order, as the Store's package reads them
(`TraceView.header`, `TraceView.entries`); this module only words and prints them."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from itertools import islice
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import RunNotFoundError
from .app import MAX_INT, DbArg, JsonOpt, RunArg, SchemaOpt, app
from .output import Column, JsonArray, emit_table, fit_cell, stdout_console, visible
from .reader import Replaced, in_schema, open_reader

if TYPE_CHECKING:
    from ..records import RunHeader, TraceEntry

# --- trace -------------------------------------------------------------------------------


def summary(entry: TraceEntry) -> str:
    """The table's one-line wording of an entry (a step: its decision → tool call ⇒ result)."""
    f = entry.fields
    if entry.kind == "step":
        what = str(f["decision"]) + (f" → {f['tool_call']}" if f["tool_call"] else "")
        return what + (f" ⇒ {f['result']}" if f.get("result") else "")
    if entry.kind == "policy":
        return _policy_summary(f)
    if entry.kind == "approval":
        return f"approval #{f['request_id']} {f['act']} {f['target']}: {f['resolved'] or 'pending'}"
    if entry.kind == "checkpoint":
        return str(f["kind"]) + (f": {f['detail']}" if f["detail"] else "")
    if entry.kind == "call":
        total = f["total_tokens"]
        what = f"{f['provider']} {f['model'] or '(unknown model)'}: " + (
            f"failed ({f['failure']})" if f["failure"] else
            f"{total if total is not None else '?'} tokens"
        )  # fmt: skip
        return f"{what}, {f['latency_ms']} ms"
    if entry.kind == "attempt":
        return f"{f['tool']}: {f['resolution'] or ('closed' if f['completed_at'] else 'open')}"
    if entry.kind == "edit":
        return f"{f['tool']} {f['path']} +{f['lines_added']} -{f['lines_removed']}"
    return f"{f['phase']} {f['outcome']}" + (f": {f['detail']}" if f["detail"] else "")


def _policy_summary(f: Mapping[str, Any]) -> str:
    if f["kind"] == "refusal":
        text = f"refused {f['act']} {f['target']}"
        if f["rule"]:
            text += f" (rule {f['rule']}" + (f", layer {f['layer']})" if f["layer"] else ")")
    else:
        text = " ".join(filter(None, (f["kind"], f["decision"], "on", f["act"], f["target"])))
        if f["source"]:
            text += f" by {f['source']}"
    if f["performed"]:
        text += f"; performed {f['performed']}"
    return text


def document(entry: TraceEntry) -> dict[str, Any]:
    """An entry as JSON shows it."""
    return {"type": entry.kind, "step": entry.step, **entry.fields}


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
    schema: SchemaOpt = None,
) -> None:
    """A run's trace in order: steps (decision, tool call, result, tokens), policy refusals and
    decisions, approvals (pending or resolved), checkpoint and resume events. Streamed: a run
    of a million steps starts printing at once, in constant memory. Read-only."""
    from ..store.trace_view import TraceView

    db = in_schema(db, schema)
    with open_reader(db) as reader, reader.connection(), ExitStack() as stack:
        view = TraceView(reader.store)
        try:
            header = view.header(run)
        except RunNotFoundError:
            raise RunNotFoundError(f"no run with id {run} in {reader.where}") from None
        read = view.entries(run, first_step=from_step, last_step=to_step)
        stack.callback(read.close)  # ended inside the read, even when the pipe closes early
        entries: Iterator[TraceEntry] = read
        if limit is not None:
            entries = islice(entries, limit)
        if as_json or jsonl:
            stream_json(header, entries, lines=jsonl, replaced=reader.replaced)
        else:
            title = (
                f"run {run}  {visible(header.status)}  {visible(header.outcome)}  "
                f"{visible(header.goal)}"
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
                    (e.step, e.kind, "" if e.tokens is None else f"{e.tokens:,}", summary(e))
                    for e in entries
                ),
            )


def stream_json(
    header: RunHeader, entries: Iterator[TraceEntry], *, lines: bool, replaced: Replaced
) -> None:
    """The trace as one JSON document written as it is read (entries, then the totals), or
    as JSON Lines: the run, one entry a line, then a `totals` line."""
    out = sys.stdout
    tokens = 0
    head = dataclasses.asdict(header)
    if lines:
        out.write(json.dumps({"type": "run", **head}, ensure_ascii=False) + "\n")
    else:
        out.write("{\n")
        for key, value in head.items():
            out.write(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},\n")
        out.write('  "entries": ')
    with JsonArray(lines=lines, out=out) as array:
        for entry in entries:
            if entry.tokens is not None:
                tokens += entry.tokens
            array.add(document(entry))
    totals = {"entry_count": array.count, "tokens": tokens, "invalid_utf8_values": replaced.count}
    if lines:
        out.write(json.dumps({"type": "totals", **totals}) + "\n")
    else:
        out.write(",\n" + ",\n".join(f"  {json.dumps(k)}: {v}" for k, v in totals.items()))
        out.write("\n}\n")
