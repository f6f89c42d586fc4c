"""A run's trace beyond its steps: sandbox, checkpoint, MCP and context events, and the
observation ledger. Each table is an ordered log read back by `id`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert, select, update

from .. import models as m
from ..errors import ResumeError
from ..formats import (
    i64,
    opt_text,
    opt_wrapped_u64,
    text,
    u32,
    unwrapped_u64,
    wrapped_u64,
)
from ..records import (
    CheckpointEvent,
    ContextEvent,
    McpEvent,
    Observation,
    ObsKind,
    SandboxEvent,
)
from .base import StoreBase


class TraceMixin(StoreBase):
    """Upstream's `trace.rs` half of the Store (steps themselves live in `runs`)."""

    def record_sandbox_event(self, e: SandboxEvent) -> None:
        """Record one sandbox lifecycle event."""
        self._append(
            m.SandboxEvent,
            run_id=i64(e.run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            backend=opt_text(e.backend, "backend"),
            detail=opt_text(e.detail, "detail"),
        )

    def sandbox_events(self, run_id: int) -> list[SandboxEvent]:
        """Every sandbox event of a run, in order."""
        s = m.SandboxEvent
        statement = (
            select(s.run_id, s.step, s.kind, s.backend, s.detail)
            .where(s.run_id == run_id)
            .order_by(s.id)
        )
        return self._rows(statement, SandboxEvent)

    def record_checkpoint_event(self, e: CheckpointEvent) -> None:
        """Record a checkpoint/resume/skipped event on its own (resume and skip markers)."""
        self._append(
            m.CheckpointEvent,
            run_id=i64(e.run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            detail=opt_text(e.detail, "detail"),
        )

    def checkpoint_events(self, run_id: int) -> list[CheckpointEvent]:
        """Every checkpoint-lifecycle event of a run, in order."""
        c = m.CheckpointEvent
        statement = (
            select(c.run_id, c.step, c.kind, c.detail).where(c.run_id == run_id).order_by(c.id)
        )
        return self._rows(statement, CheckpointEvent)

    # --- MCP -----------------------------------------------------------------------------

    def record_mcp(self, run_id: int, e: McpEvent) -> None:
        """Record one MCP event; `ok` is stored as 0/1."""
        self._append(
            m.McpEvent,
            run_id=i64(run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            server=text(e.server, "server"),
            tool=opt_text(e.tool, "tool"),
            ok=None if e.ok is None else int(bool(e.ok)),
            millis=opt_wrapped_u64(e.millis, "millis"),
            detail=opt_text(e.detail, "detail"),
        )

    def mcp_events(self, run_id: int) -> list[McpEvent]:
        """Every MCP event of a run, in order."""
        e = m.McpEvent
        statement = (
            select(e.step, e.kind, e.server, e.tool, e.ok, e.millis, e.detail)
            .where(e.run_id == run_id)
            .order_by(e.id)
        )

        def make(step: int, kind: str, server: str, tool: str | None, ok: int | None,
                 millis: int | None, detail: str | None) -> McpEvent:  # fmt: skip
            return McpEvent(step, kind, server, tool, None if ok is None else bool(ok),
                            unwrapped_u64(millis), detail)  # fmt: skip

        return self._rows(statement, make)

    # --- context and the ledger ----------------------------------------------------------

    def record_context_event(self, run_id: int, e: ContextEvent) -> None:
        """Record one context-assembly event."""
        self._append(
            m.ContextEvent,
            run_id=i64(run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            detail=opt_text(e.detail, "detail"),
            est_tokens=opt_wrapped_u64(e.est_tokens, "est_tokens"),
            reported_tokens=opt_wrapped_u64(e.reported_tokens, "reported_tokens"),
        )

    def record_context_reported(self, run_id: int, step: int, reported: int) -> None:
        """Fill in what the provider said a turn cost, beside the estimate (drift readable)."""
        c = m.ContextEvent
        with self._write() as conn:
            conn.execute(
                update(c)
                .where(c.run_id == run_id, c.step == u32(step, "step"), c.kind == "assembled")
                .values(reported_tokens=wrapped_u64(reported, "reported"))
            )

    def context_events(self, run_id: int) -> list[ContextEvent]:
        """Every context-assembly event of a run, in order."""
        c = m.ContextEvent
        statement = (
            select(c.step, c.kind, c.detail, c.est_tokens, c.reported_tokens)
            .where(c.run_id == run_id)
            .order_by(c.id)
        )

        def make(step: int, kind: str, detail: str | None, est: int | None,
                 reported: int | None) -> ContextEvent:  # fmt: skip
            return ContextEvent(step, kind, detail, unwrapped_u64(est), unwrapped_u64(reported))

        return self._rows(statement, make)

    def record_observations(self, run_id: int, entries: Sequence[Observation]) -> None:
        """Append observations to the run's ledger in one transaction (all or none)."""
        rows = [
            {
                "run_id": i64(run_id, "run_id"),
                "step": u32(o.step, "step"),
                "kind": ObsKind(o.kind).value,
                "target": opt_text(o.target, "target"),
                "text": text(o.text, "text"),
            }
            for o in entries
        ]
        if not rows:
            return
        with self._write() as conn:
            conn.execute(insert(m.LedgerObservation), rows)

    def observations(self, run_id: int) -> list[Observation]:
        """The run's ledger in observed order; an unknown kind raises `ResumeError` rather
        than returning a shorter ledger."""
        o = m.LedgerObservation
        statement = (
            select(o.step, o.kind, o.target, o.text).where(o.run_id == run_id).order_by(o.id)
        )
        with self._read() as conn:
            rows = conn.execute(statement).all()
        out = []
        for step, kind, target, body in rows:
            try:
                obs_kind = ObsKind(kind)
            except ValueError:
                raise ResumeError(
                    f"run {run_id} has a ledger observation of unknown kind {kind!r}"
                ) from None
            out.append(Observation(step, obs_kind, target, body))
        return out
