"""Agent trees: spawn events and contracts, the spawn queue, messages between agents, and the
background processes an agent runs (io-harness 0.5, 0.7, 0.25, 0.32, 0.60)."""

from __future__ import annotations

from sqlalchemy import Index, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .base import AUTOINCREMENT, Base, defaulted, rowid_key, stamped


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


class Spawn(Base):
    """A spawned child's contract, so a tree resume adopts the child instead of spawning twice
    (0.7); the name other agents address it by from 0.60."""

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
    as_name: Mapped[str] = defaulted("''")


class ProcessHandle(Base):
    """A background process an agent started: its command line, pids, state and exit (0.25).
    A handle number is unique within its run."""

    __tablename__ = "process_handles"
    __table_args__ = (
        Index("process_handles_run", "run_id", "handle", unique=True),
        AUTOINCREMENT,
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    handle: Mapped[int]
    step: Mapped[int]
    line: Mapped[str]
    pids: Mapped[str] = defaulted("''")
    state: Mapped[str]
    code: Mapped[int | None]
    reason: Mapped[str | None]
    started_at: Mapped[str] = stamped()
    ended_at: Mapped[str | None]

    output: Mapped[list[HandleOutput]] = relationship(
        primaryjoin="and_(ProcessHandle.run_id == foreign(HandleOutput.run_id), "
        "ProcessHandle.handle == foreign(HandleOutput.handle))",
        order_by="HandleOutput.id",
        viewonly=True,
    )


class HandleOutput(Base):
    """A chunk of a background process's output, as the agent read it (0.25)."""

    __tablename__ = "handle_output"
    __table_args__ = (Index("handle_output_run", "run_id", "handle"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    handle: Mapped[int]
    step: Mapped[int]
    chunk: Mapped[str]
    read_at: Mapped[str] = stamped()


class AgentQueueEntry(Base):
    """A child waiting to be spawned, once per (parent, step, goal) (0.32)."""

    __tablename__ = "agent_queue"
    __table_args__ = (
        Index("agent_queue_entry", "parent_run_id", "step", "goal", unique=True),
        AUTOINCREMENT,
    )

    id: Mapped[int] = rowid_key()
    parent_run_id: Mapped[int]
    step: Mapped[int]
    goal: Mapped[str]
    depth: Mapped[int]
    queued_at: Mapped[str] = stamped()


class AgentMessage(Base):
    """A message one agent of a tree sent another, and when it was read (0.60)."""

    __tablename__ = "agent_messages"
    __table_args__ = (Index("agent_messages_to", "to_run_id", "id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    from_run_id: Mapped[int]
    to_run_id: Mapped[int]
    from_name: Mapped[str]
    step: Mapped[int]
    body: Mapped[str]
    sent_at: Mapped[str] = stamped()
    read_at: Mapped[str | None]
