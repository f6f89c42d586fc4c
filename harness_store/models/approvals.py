"""What a person decided or is asked to decide: policy events, pending approvals, questions
and plans (io-harness 0.4, 0.21, 0.31)."""

from __future__ import annotations

from sqlalchemy import Index
from sqlalchemy.orm import Mapped

from .base import AUTOINCREMENT, Base, defaulted, rowid_key, stamped


class PolicyEvent(Base):
    """A policy refusal or a human decision on a sensitive action (0.4). Never file contents."""

    __tablename__ = "policy_events"
    __table_args__ = (Index("hs_policy_events_run_id", "run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    act: Mapped[str]
    target: Mapped[str]
    rule: Mapped[str | None]
    layer: Mapped[str | None]
    decision: Mapped[str | None]
    source: Mapped[str | None]
    performed: Mapped[str | None]


class PendingApproval(Base):
    """An action paused for a human, with the payload needed to replay exactly what is approved
    (0.4)."""

    __tablename__ = "pending_approvals"
    __table_args__ = (Index("hs_pending_approvals_run_id", "run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    act: Mapped[str]
    target: Mapped[str]
    content: Mapped[str | None]
    resolved: Mapped[str | None]


class PendingQuestion(Base):
    """A question the agent asked a person, its choices, and the answer once given (0.21)."""

    __tablename__ = "pending_questions"
    __table_args__ = (AUTOINCREMENT,)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    question: Mapped[str]
    context: Mapped[str | None]
    choices: Mapped[str | None]
    answer: Mapped[str | None]
    answered_by: Mapped[str | None]
    resolved: Mapped[int] = defaulted("0")
    asked_at: Mapped[str] = stamped()


class Plan(Base):
    """A plan proposed for approval (steps as JSON) and its verdict or correction (0.31)."""

    __tablename__ = "plans"
    __table_args__ = (Index("plans_run", "run_id", "verdict"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    steps: Mapped[str]
    verdict: Mapped[str | None]
    correction: Mapped[str | None]
    decided_by: Mapped[str | None]
    resolved: Mapped[int] = defaulted("0")
    proposed_at: Mapped[str] = stamped()
