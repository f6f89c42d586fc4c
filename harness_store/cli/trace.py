"""`harness-store trace`: a run's steps and events in order."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from sqlalchemy import select

from .. import models as m
from ..errors import (
    RunNotFoundError,
)

if TYPE_CHECKING:
    pass
from .app import EPILOG, DbArg, JsonOpt, RunArg, app
from .output import emit_json, emit_table, stdout_console, visible
from .reader import Reader, open_reader

# --- trace -------------------------------------------------------------------------------

ENTRY_RANK = {"policy": 0, "approval": 1, "step": 2, "checkpoint": 3}
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


def event_entries(reader: Reader, run_id: int) -> list[Entry]:
    """The run's policy events, approvals and checkpoint events, in trace order."""
    store = reader.store
    entries: list[Entry] = []
    for seq, e in enumerate(store.events(run_id)):
        if e.kind == "refusal":
            summary = f"refused {e.act} {e.target}"
            if e.rule:
                summary += f" (rule {e.rule}" + (f", layer {e.layer})" if e.layer else ")")
        else:
            summary = " ".join(filter(None, (e.kind, e.decision, "on", e.act, e.target)))
            if e.source:
                summary += f" by {e.source}"
        if e.performed:
            summary += f"; performed {e.performed}"
        fields: dict[str, Any] = {
            "kind": e.kind,
            "act": e.act,
            "target": e.target,
            "rule": e.rule,
            "layer": e.layer,
            "decision": e.decision,
            "source": e.source,
            "performed": e.performed,
        }
        entries.append(Entry(e.step, "policy", seq, None, summary, fields))
    approvals = [
        (a.id, a.step, a.act, a.target, a.content, a.resolved)
        for a in store.pending_for_run(run_id)
    ]
    for seq, (request_id, step, act, target, content, resolved) in enumerate(approvals):
        summary = f"approval #{request_id} {act} {target}: {resolved or 'pending'}"
        fields = {
            "request_id": request_id,
            "act": act,
            "target": target,
            "content": content,
            "resolved": resolved,
        }
        entries.append(Entry(step, "approval", seq, None, summary, fields))
    for seq, c in enumerate(store.checkpoint_events(run_id)):
        summary = c.kind + (f": {c.detail}" if c.detail else "")
        entries.append(
            Entry(c.step, "checkpoint", seq, None, summary, {"kind": c.kind, "detail": c.detail})
        )
    return sorted(entries, key=lambda entry: entry.key)


def trace_entries(reader: Reader, run_id: int) -> Iterator[Entry]:
    """The run's steps (streamed) merged with its events, in order."""
    steps = (
        Entry(
            s.step,
            "step",
            seq,
            s.tokens,
            s.decision + (f" → {s.tool_call}" if s.tool_call else ""),
            {
                "decision": s.decision,
                "tool_call": s.tool_call,
                "tokens": s.tokens,
                "result": s.result,
            },
        )
        for seq, s in enumerate(reader.store.iter_steps(run_id))
    )
    return heapq.merge(steps, event_entries(reader, run_id), key=lambda entry: entry.key)


@app.command("trace", epilog=EPILOG)
def trace_command(db: DbArg, run: RunArg, as_json: JsonOpt = False) -> None:
    """A run's trace in order: steps (decision, tool call, tokens), policy refusals and
    decisions, approvals (pending or resolved), checkpoint and resume events. Read-only."""
    with open_reader(db) as reader:
        header = run_header(reader, run)
        if as_json:
            entries = [entry.document() for entry in trace_entries(reader, run)]
            tokens = sum(e["tokens"] for e in entries if e["type"] == "step")
            emit_json({**header, "tokens": tokens, "entries": entries})
            return
        stdout_console().print(
            Text(
                f"run {run}  {visible(header['status'])}  {visible(header['outcome'])}  "
                f"{visible(header['goal'])}"
            )
        )
        emit_table(
            [("step", "right"), ("type", "left"), ("tokens", "right"), ("what", "left")],
            (
                (e.step, e.type, "" if e.tokens is None else f"{e.tokens:,}", e.summary)
                for e in trace_entries(reader, run)
            ),
        )
