"""The human-in-the-loop channel: policy refusals and decisions, and pending approvals that
outlive the process until a person resolves them."""

from __future__ import annotations

from sqlalchemy import insert, select, update

from .. import models as m
from ..formats import (
    opt_text,
    text,
    u32,
)
from ..records import (
    Pending,
    PolicyEvent,
)
from .base import StoreBase
from .marks import reads, writes
from .prune_guard import hold_run


class ApprovalsMixin(StoreBase):
    """Upstream's `approvals.rs` half of the Store."""

    @writes
    def record_event(self, run_id: int, e: PolicyEvent) -> None:
        """Record a policy refusal or a human decision against a run."""
        values = dict(
            run_id=run_id,
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
        with self._write() as conn:
            hold_run(conn, self._backend, values["run_id"])  # a prune of the run: its turn
            conn.execute(insert(m.PolicyEvent).values(**values))

    @reads
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

    @writes
    def put_pending(
        self, run_id: int, step: int, act: str, target: str, content: str | None = None
    ) -> int:
        """Persist an action awaiting a human decision; return its request id."""
        statement = (
            insert(m.PendingApproval)
            .values(
                run_id=run_id,
                step=u32(step, "step"),
                act=text(act, "act"),
                target=text(target, "target"),
                content=opt_text(content, "content"),
            )
            .returning(m.PendingApproval.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @reads
    def pending(self, request_id: int) -> Pending | None:
        """A pending action by request id, if there is one."""
        p = m.PendingApproval
        statement = select(p.id, p.run_id, p.step, p.act, p.target, p.content, p.resolved).where(
            p.id == request_id
        )
        rows = self._rows(statement, Pending)
        return rows[0] if rows else None

    @reads
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

    @writes
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

    @reads
    def unresolved_approvals(self, run_id: int) -> list[Pending]:
        """The approval requests of a run still awaiting a decision, in order: what a person
        is asked on resume."""
        p = m.PendingApproval
        statement = (
            select(p.id, p.run_id, p.step, p.act, p.target, p.content, p.resolved)
            .where(p.run_id == run_id, p.resolved.is_(None))
            .order_by(p.id)
        )
        return self._rows(statement, Pending)
