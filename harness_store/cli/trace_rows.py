"""The rows `harness-store trace` shows beyond 0.13's: provider calls, tool attempts, edits
and gate attempts (io-harness 0.18 – 0.65). A store from a release before a table existed
simply shows none of its rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, inspect, select

if TYPE_CHECKING:
    from .trace import Entry, Window

NEWER_RANKS = {"call": 2, "attempt": 3, "edit": 4, "gate": 6}
"""Where each kind sits within one step number, beside `trace.ENTRY_RANK`'s: the provider's
answer, the tool attempts and edits it led to, the step (5), then its gate and checkpoint."""


def newer_entries(conn: Connection, run_id: int, window: Window) -> list[Iterator[Entry]]:
    """One ordered stream per newer table the store has."""
    from .. import models as m  # the models only when `trace` runs
    from .trace import Entry, rows_of

    tables = set(inspect(conn).get_table_names())
    streams: list[Iterator[Entry]] = []

    def stream(model: Any, columns: list[Any], make: Any) -> None:
        if model.__tablename__ not in tables:
            return
        statement = select(model.id, model.step, *columns).where(model.run_id == run_id)
        statement = statement.order_by(model.step, model.id)
        streams.append(
            Entry(step, kind, seq, tokens, summary, fields)
            for seq, step, *rest in rows_of(conn, statement, model.step, window)
            for kind, tokens, summary, fields in [make(*rest)]
        )

    def call(provider: str, model: str | None, total: int | None, latency: int,
             failure: str | None) -> tuple[str, int | None, str, dict[str, Any]]:  # fmt: skip
        what = f"{provider} {model or '(unknown model)'}: " + (
            f"failed ({failure})" if failure else f"{total if total is not None else '?'} tokens"
        )
        fields = {"provider": provider, "model": model, "total_tokens": total,
                  "latency_ms": latency, "failure": failure}  # fmt: skip
        return "call", None, f"{what}, {latency} ms", fields

    pc = m.ProviderCall
    stream(pc, [pc.provider, pc.model, pc.total_tokens, pc.latency_ms, pc.failure], call)

    def attempt(tool: str, completed: str | None, resolution: str | None) -> Any:
        state = resolution or ("closed" if completed else "open")
        return "attempt", None, f"{tool}: {state}", {"tool": tool, "completed_at": completed,
                                                     "resolution": resolution}  # fmt: skip

    ta = m.ToolAttempt
    stream(ta, [ta.tool, ta.completed_at, ta.resolution], attempt)

    def edit(tool: str, path: str, added: int, removed: int) -> Any:
        return "edit", None, f"{tool} {path} +{added} -{removed}", {
            "tool": tool, "path": path, "lines_added": added, "lines_removed": removed}  # fmt: skip

    e = m.Edit
    stream(e, [e.tool, e.path, e.lines_added, e.lines_removed], edit)

    def gate(phase: str, outcome: str, detail: str) -> Any:
        return "gate", None, f"{phase} {outcome}" + (f": {detail}" if detail else ""), {
            "phase": phase, "outcome": outcome, "detail": detail}  # fmt: skip

    g = m.GateAttempt
    stream(g, [g.phase, g.outcome, g.detail], gate)
    return streams
