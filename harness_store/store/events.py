"""Events of a run: policy, pending approvals, agents, sandbox, checkpoints, MCP, context, and
the observation ledger. Each event table is an ordered log read back by `id`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert, select, update

from .. import models as m
from ..errors import ResumeError
from ..formats import (
    i64,
    opt_text,
    opt_u64,
    opt_wrapped_u64,
    text,
    u32,
    unwrapped_u64,
    wrapped_u64,
)
from ..records import (
    AgentEvent,
    CheckpointEvent,
    ContextEvent,
    McpEvent,
    Observation,
    ObsKind,
    Pending,
    PolicyEvent,
    SandboxEvent,
)
from .base import StoreBase


class EventsMixin(StoreBase):
    """The event half of upstream's Store."""

    def _append(self, model: type[m.Base], **values: object) -> None:
        with self._write() as conn:
            conn.execute(insert(model).values(**values))

    # --- policy --------------------------------------------------------------------------

    def record_event(self, run_id: int, e: PolicyEvent) -> None:
        """Record a policy refusal or a human decision against a run."""
        self._append(
            m.PolicyEvent,
            run_id=i64(run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            act=text(e.act, "act"),
            target=text(e.target, "target"),
            rule=opt_text(e.rule, "rule"),
            layer=opt_text(e.layer, "layer"),
            decision=opt_text(e.decision, "decision"),
            source=opt_text(e.source, "source"),
            performed=opt_text(e.performed, "performed"),
        )

    def events(self, run_id: int) -> list[PolicyEvent]:
        """Every policy event of a run, in order."""
        p = m.PolicyEvent
        statement = (
            select(
                p.step, p.kind, p.act, p.target, p.rule, p.layer, p.decision, p.source, p.performed
            )
            .where(p.run_id == run_id)
            .order_by(p.id)
        )
        return self._rows(statement, PolicyEvent)

    def put_pending(
        self, run_id: int, step: int, act: str, target: str, content: str | None = None
    ) -> int:
        """Persist an action awaiting a human decision; return its request id."""
        statement = (
            insert(m.PendingApproval)
            .values(
                run_id=i64(run_id, "run_id"),
                step=u32(step, "step"),
                act=text(act, "act"),
                target=text(target, "target"),
                content=opt_text(content, "content"),
            )
            .returning(m.PendingApproval.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    def pending(self, request_id: int) -> Pending | None:
        """A pending action by request id, if there is one."""
        p = m.PendingApproval
        statement = select(p.id, p.run_id, p.step, p.act, p.target, p.content, p.resolved).where(
            p.id == request_id
        )
        rows = self._rows(statement, Pending)
        return rows[0] if rows else None

    def pending_for_run(self, run_id: int) -> list[Pending]:
        """Every approval request of a run, resolved or not, in order (beyond upstream: the
        list a reviewer or the CLI shows)."""
        p = m.PendingApproval
        statement = (
            select(p.id, p.run_id, p.step, p.act, p.target, p.content, p.resolved)
            .where(p.run_id == run_id)
            .order_by(p.id)
        )
        return self._rows(statement, Pending)

    def resolve_pending(self, request_id: int, decision: str) -> bool:
        """Decide a pending action, so a resume knows what the human chose; True if this call
        decided it. A request is decided once (0.33): a second decision, or one for a request
        that does not exist, changes nothing and returns False."""
        p = m.PendingApproval
        with self._write() as conn:
            changed = conn.execute(
                update(p)
                .where(p.id == request_id, p.resolved.is_(None))
                .values(resolved=text(decision, "decision"))
            ).rowcount
        return bool(changed == 1)

    # --- agents, sandbox, checkpoints ----------------------------------------------------

    def record_agent_event(self, e: AgentEvent) -> None:
        """Record a spawn, a refused spawn, or a budget draw against the tree."""
        self._append(
            m.AgentEvent,
            run_id=i64(e.run_id, "run_id"),
            step=u32(e.step, "step"),
            kind=text(e.kind, "kind"),
            child_run_id=None if e.child_run_id is None else i64(e.child_run_id, "child_run_id"),
            detail=opt_text(e.detail, "detail"),
            tokens=opt_u64(e.tokens, "tokens"),
            remaining=opt_u64(e.remaining, "remaining"),
        )

    def agent_events(self, run_id: int) -> list[AgentEvent]:
        """Every agent event of a run, in order."""
        a = m.AgentEvent
        statement = (
            select(a.run_id, a.step, a.kind, a.child_run_id, a.detail, a.tokens, a.remaining)
            .where(a.run_id == run_id)
            .order_by(a.id)
        )
        return self._rows(statement, AgentEvent)

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
