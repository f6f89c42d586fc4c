"""SQLAlchemy declarative models of the io-harness 0.13 run store: fourteen tables.

On SQLite the DDL these models emit is upstream's own shape — `TEXT`/`INTEGER` types, the same
nullability and server defaults, `AUTOINCREMENT` exactly where upstream has it, no constraint
upstream lacks — so a store created here opens in io-harness 0.13 as its own. On PostgreSQL the
integers widen to `BIGINT` (upstream's ids are `i64`, its token counts `u64`).

Relationships are for navigation only: they never add a foreign key. The one foreign key is
upstream's `steps.run_id REFERENCES runs(id)`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import ForeignKey, Index, MetaData, Table, Text, UniqueConstraint, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from .sqltypes import INT

AUTOINCREMENT: dict[str, Any] = {"sqlite_autoincrement": True}
"""Table option for upstream's `INTEGER PRIMARY KEY AUTOINCREMENT` ids (ids never reused)."""


def rowid_key(*, autoincrement: bool = True) -> Mapped[int]:
    """An `INTEGER PRIMARY KEY` as upstream declares it: the rowid, with no explicit NOT NULL."""
    return mapped_column(primary_key=True, nullable=True, autoincrement=autoincrement)


class Base(DeclarativeBase):
    """Declarative base of the run-store models."""

    metadata = MetaData()
    type_annotation_map: ClassVar[dict[Any, Any]] = {int: INT, str: Text()}


class Run(Base):
    """One agent run: goal, the file it works on, outcome and lifecycle (0.1, 0.3, 0.5, 0.7).

    `status` is what resume looks for (`running` after a crash); `started_at` is stamped from
    the database clock so a wall-clock budget survives a restart.
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
    policy_events: Mapped[list[PolicyEvent]] = relationship(
        primaryjoin="Run.id == foreign(PolicyEvent.run_id)",
        order_by="PolicyEvent.id",
        viewonly=True,
    )
    pending_approvals: Mapped[list[PendingApproval]] = relationship(
        primaryjoin="Run.id == foreign(PendingApproval.run_id)",
        order_by="PendingApproval.id",
        viewonly=True,
    )
    agent_events: Mapped[list[AgentEvent]] = relationship(
        primaryjoin="Run.id == foreign(AgentEvent.run_id)", order_by="AgentEvent.id", viewonly=True
    )
    sandbox_events: Mapped[list[SandboxEvent]] = relationship(
        primaryjoin="Run.id == foreign(SandboxEvent.run_id)",
        order_by="SandboxEvent.id",
        viewonly=True,
    )
    checkpoint_events: Mapped[list[CheckpointEvent]] = relationship(
        primaryjoin="Run.id == foreign(CheckpointEvent.run_id)",
        order_by="CheckpointEvent.id",
        viewonly=True,
    )
    spawns: Mapped[list[Spawn]] = relationship(
        primaryjoin="Run.id == foreign(Spawn.parent_run_id)", order_by="Spawn.id", viewonly=True
    )
    mcp_events: Mapped[list[McpEvent]] = relationship(
        primaryjoin="Run.id == foreign(McpEvent.run_id)", order_by="McpEvent.id", viewonly=True
    )
    context_events: Mapped[list[ContextEvent]] = relationship(
        primaryjoin="Run.id == foreign(ContextEvent.run_id)",
        order_by="ContextEvent.id",
        viewonly=True,
    )
    observations: Mapped[list[LedgerObservation]] = relationship(
        primaryjoin="Run.id == foreign(LedgerObservation.run_id)",
        order_by="LedgerObservation.id",
        viewonly=True,
    )


class Step(Base):
    """One trace entry of a run (0.1; prompt, tool_call and tokens from 0.2).

    There is no UNIQUE(run_id, step): a retry writes its own row under the step number the
    eventual commit reuses, so rows are trace entries, `MAX(step)` is the run's progress.
    """

    __tablename__ = "steps"
    __table_args__ = (Index("hs_steps_run_id_step", "run_id", "step"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    step: Mapped[int]
    decision: Mapped[str]
    result: Mapped[str]
    prompt: Mapped[str] = mapped_column(server_default=text("''"))
    tool_call: Mapped[str] = mapped_column(server_default=text("''"))
    tokens: Mapped[int] = mapped_column(server_default=text("0"))

    run: Mapped[Run] = relationship(back_populates="steps", viewonly=True)


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


class AgentEvent(Base):
    """A spawn, a refused spawn, or a draw on the tree's shared budget (0.5)."""

    __tablename__ = "agent_events"
    __table_args__ = (Index("hs_agent_events_run_id", "run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    child_run_id: Mapped[int | None]
    detail: Mapped[str | None]
    tokens: Mapped[int | None]
    remaining: Mapped[int | None]


class SandboxEvent(Base):
    """One event in a sandboxed execution's life: create, exec, cap hit, destroy, gate phase
    (0.6)."""

    __tablename__ = "sandbox_events"
    __table_args__ = (Index("hs_sandbox_events_run_id", "run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    backend: Mapped[str | None]
    detail: Mapped[str | None]


class CheckpointEvent(Base):
    """A checkpoint, resume or skipped-step marker (0.7); a committed `checkpoint` row is a
    step's completion marker."""

    __tablename__ = "checkpoint_events"
    __table_args__ = (Index("hs_checkpoint_events_run_id", "run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    detail: Mapped[str | None]


class Spawn(Base):
    """A spawned child's contract, so a tree resume adopts the child instead of spawning twice
    (0.7)."""

    __tablename__ = "spawns"
    __table_args__ = (Index("hs_spawns_parent_run_id_step", "parent_run_id", "step"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    parent_run_id: Mapped[int]
    step: Mapped[int]
    child_run_id: Mapped[int]
    goal: Mapped[str]
    verify_file: Mapped[str]
    needle: Mapped[str]
    max_steps: Mapped[int | None]
    deny_write: Mapped[str] = mapped_column(server_default=text("'[]'"))


class McpEvent(Base):
    """One event of an MCP conversation: connected, discovered, called, disconnected (0.8)."""

    __tablename__ = "mcp_events"
    __table_args__ = (Index("hs_mcp_events_run_id", "run_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    server: Mapped[str]
    tool: Mapped[str | None]
    ok: Mapped[int | None]
    millis: Mapped[int | None]
    detail: Mapped[str | None]


class Memory(Base):
    """Durable cross-run memory, keyed to a workspace (0.10). Capped per workspace; ids may be
    reused (no AUTOINCREMENT upstream)."""

    __tablename__ = "memory"
    __table_args__ = (UniqueConstraint("workspace", "key"),)

    id: Mapped[int] = rowid_key()
    workspace: Mapped[str]
    key: Mapped[str]
    value: Mapped[str]
    run_id: Mapped[int]
    step: Mapped[int]
    created_at: Mapped[str]


class ContextEvent(Base):
    """What the context assembler decided for a turn, or a re-read (0.10)."""

    __tablename__ = "context_events"
    __table_args__ = (Index("hs_context_events_run_id", "run_id"),)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    detail: Mapped[str | None]
    est_tokens: Mapped[int | None]
    reported_tokens: Mapped[int | None]


class RunOutcome(Base):
    """One summary row per finished run: outcome, success, steps, tokens, duration (0.12)."""

    __tablename__ = "run_outcomes"

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


class LedgerObservation(Base):
    """One observation of a run's durable context ledger, ordered by id (0.13)."""

    __tablename__ = "ledger_observations"
    __table_args__ = (Index("hs_ledger_observations_run_id", "run_id"),)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    kind: Mapped[str]
    target: Mapped[str | None]
    text: Mapped[str]


UPSTREAM_TABLES: tuple[str, ...] = tuple(Base.metadata.tables)
"""The fourteen tables of io-harness 0.13, in release order."""

HARNESS_INDEXES: tuple[str, ...] = tuple(
    str(index.name)
    for table in Base.metadata.tables.values()
    for index in table.indexes
    if str(index.name).startswith("hs_")
)
"""Indexes harness_store adds beyond upstream (revision hs1); upstream never reads them."""


def table_of(model: type[Base]) -> Table:
    """The Core `Table` behind a model (typed, for Core statements on hot paths)."""
    return Base.metadata.tables[model.__tablename__]
