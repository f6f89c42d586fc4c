"""Runs and their steps, outcomes and recorded policies (io-harness 0.1 – 0.37)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import ForeignKey, Index, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .base import AUTOINCREMENT, Base, rowid_key

if TYPE_CHECKING:
    from .accounting import ProviderCall
    from .agents import AgentEvent, AgentMessage, AgentQueueEntry, ProcessHandle, Spawn
    from .approvals import PendingApproval, PendingQuestion, Plan, PolicyEvent
    from .leases import RunLease
    from .memory import MemoryRecall, MemorySnapshot, Summary, Todo
    from .trace import (
        CheckpointEvent,
        Citation,
        ContextEvent,
        Edit,
        GateAttempt,
        LedgerObservation,
        McpEvent,
        Rewind,
        RunEvent,
        SandboxEvent,
        ServerToolCall,
        Snapshot,
        StepTurn,
        ToolAttempt,
    )


def _events(model: str, key: str = "run_id") -> Any:
    """A view-only one-to-many from a run to rows whose `key` names it, in id order."""
    return relationship(
        primaryjoin=f"Run.id == foreign({model}.{key})",
        order_by=f"{model}.id",
        viewonly=True,
    )


class Run(Base):
    """One agent run: goal, file, outcome and lifecycle (0.1; provider 0.3; parent_run_id and
    depth 0.5; status and started_at 0.7; turn_kind 0.37).

    `status` is what resume looks for (`running` after a crash); `started_at` is stamped from
    the database clock so a wall-clock budget survives a restart; `turn_kind` says what kind of
    session turn a run served (0.37).
    """

    __tablename__ = "runs"
    __table_args__ = (Index("hs_runs_parent_run_id", "parent_run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    goal: Mapped[str]
    file: Mapped[str]
    outcome: Mapped[str | None]
    provider: Mapped[str | None]
    parent_run_id: Mapped[int | None]
    depth: Mapped[int] = mapped_column(server_default=text("0"))
    status: Mapped[str] = mapped_column(server_default=text("'running'"))
    started_at: Mapped[str | None]
    turn_kind: Mapped[str | None]

    steps: Mapped[list[Step]] = relationship(
        back_populates="run", order_by="(Step.step, Step.id)", viewonly=True
    )
    parent: Mapped[Run | None] = relationship(
        primaryjoin="foreign(Run.parent_run_id) == remote(Run.id)",
        back_populates="children",
        viewonly=True,
    )
    children: Mapped[list[Run]] = relationship(
        primaryjoin="remote(foreign(Run.parent_run_id)) == Run.id",
        back_populates="parent",
        order_by="Run.id",
        viewonly=True,
    )
    outcome_row: Mapped[RunOutcome | None] = relationship(
        primaryjoin="Run.id == foreign(RunOutcome.run_id)", viewonly=True
    )
    policy: Mapped[RunPolicy | None] = relationship(
        primaryjoin="Run.id == foreign(RunPolicy.run_id)", viewonly=True
    )
    lease: Mapped[RunLease | None] = relationship(
        primaryjoin="Run.id == foreign(RunLease.run_id)", viewonly=True
    )
    policy_events: Mapped[list[PolicyEvent]] = _events("PolicyEvent")
    pending_approvals: Mapped[list[PendingApproval]] = _events("PendingApproval")
    agent_events: Mapped[list[AgentEvent]] = _events("AgentEvent")
    sandbox_events: Mapped[list[SandboxEvent]] = _events("SandboxEvent")
    checkpoint_events: Mapped[list[CheckpointEvent]] = _events("CheckpointEvent")
    spawns: Mapped[list[Spawn]] = _events("Spawn", "parent_run_id")
    mcp_events: Mapped[list[McpEvent]] = _events("McpEvent")
    context_events: Mapped[list[ContextEvent]] = _events("ContextEvent")
    observations: Mapped[list[LedgerObservation]] = _events("LedgerObservation")
    provider_calls: Mapped[list[ProviderCall]] = _events("ProviderCall")
    edits: Mapped[list[Edit]] = _events("Edit")
    todos: Mapped[list[Todo]] = _events("Todo")
    questions: Mapped[list[PendingQuestion]] = _events("PendingQuestion")
    citations: Mapped[list[Citation]] = _events("Citation")
    server_tool_calls: Mapped[list[ServerToolCall]] = _events("ServerToolCall")
    process_handles: Mapped[list[ProcessHandle]] = _events("ProcessHandle")
    snapshots: Mapped[list[Snapshot]] = _events("Snapshot")
    memory_recalls: Mapped[list[MemoryRecall]] = _events("MemoryRecall")
    plans: Mapped[list[Plan]] = _events("Plan")
    queued: Mapped[list[AgentQueueEntry]] = _events("AgentQueueEntry", "parent_run_id")
    run_events: Mapped[list[RunEvent]] = _events("RunEvent")
    gate_attempts: Mapped[list[GateAttempt]] = _events("GateAttempt")
    memory_snapshots: Mapped[list[MemorySnapshot]] = _events("MemorySnapshot")
    rewinds: Mapped[list[Rewind]] = _events("Rewind")
    summaries: Mapped[list[Summary]] = _events("Summary")
    inbox: Mapped[list[AgentMessage]] = _events("AgentMessage", "to_run_id")
    tool_attempts: Mapped[list[ToolAttempt]] = _events("ToolAttempt")
    step_turns: Mapped[list[StepTurn]] = relationship(
        primaryjoin="Run.id == foreign(StepTurn.run_id)", order_by="StepTurn.step", viewonly=True
    )


class Step(Base):
    """One trace entry of a run (0.1; prompt, tool_call and tokens from 0.2).

    There is no UNIQUE(run_id, step): a retry writes its own row under the step number the
    eventual commit reuses, so rows are trace entries, `MAX(step)` is the run's progress.
    """

    __tablename__ = "steps"
    __table_args__ = (
        Index("hs_steps_run_id_step_id_tokens", "run_id", "step", "id", "tokens"),  # hs2
        AUTOINCREMENT,
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    step: Mapped[int]
    decision: Mapped[str]
    result: Mapped[str]
    prompt: Mapped[str] = mapped_column(server_default=text("''"))
    tool_call: Mapped[str] = mapped_column(server_default=text("''"))
    tokens: Mapped[int] = mapped_column(server_default=text("0"))

    run: Mapped[Run] = relationship(back_populates="steps", viewonly=True)


class RunOutcome(Base):
    """One summary row per finished run: outcome, success, steps, tokens, duration (0.12);
    indexed by outcome and by finish time for the roll-ups (0.30)."""

    __tablename__ = "run_outcomes"
    __table_args__ = (
        Index("run_outcomes_outcome", "outcome"),
        Index("run_outcomes_finished", "finished_at"),
    )

    run_id: Mapped[int] = rowid_key(autoincrement=False)
    outcome: Mapped[str]
    success: Mapped[int]
    steps: Mapped[int]
    tokens: Mapped[int]
    duration_ms: Mapped[int | None]
    finished_at: Mapped[str]


class RunPolicy(Base):
    """The policy a run was started under, as JSON (0.13). No row means nobody recorded one."""

    __tablename__ = "run_policies"

    run_id: Mapped[int] = rowid_key(autoincrement=False)
    policy: Mapped[str]
