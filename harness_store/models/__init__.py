"""SQLAlchemy declarative models of the io-harness run store, every table through 0.66.

One module per concern, as upstream splits its store: `runs` (runs, steps, outcomes,
policies), `trace` (what happened inside a run), `approvals`, `agents`, `memory`, `accounting`,
`leases`, `sessions`, over `base`. Everything is re-exported here, so
`from harness_store.models import Run` works whatever module a model lives in.

Relationships are for navigation only: they never add a foreign key. The one foreign key is
upstream's `steps.run_id REFERENCES runs(id)`.
"""

from __future__ import annotations

from sqlalchemy import Table

from ..releases import RELEASES
from .accounting import ProviderCall
from .agents import (
    AgentEvent,
    AgentMessage,
    AgentQueueEntry,
    HandleOutput,
    ProcessHandle,
    Spawn,
)
from .approvals import PendingApproval, PendingQuestion, Plan, PolicyEvent
from .base import AUTOINCREMENT, Base, rowid_key
from .leases import RunLease
from .memory import Memory, MemoryRecall, MemorySnapshot, Summary, Todo
from .runs import Run, RunOutcome, RunPolicy, Step
from .sessions import Session, SessionTurn
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

__all__ = [
    "AUTOINCREMENT",
    "HARNESS_INDEXES",
    "UPSTREAM_TABLES",
    "AgentEvent",
    "AgentMessage",
    "AgentQueueEntry",
    "Base",
    "CheckpointEvent",
    "Citation",
    "ContextEvent",
    "Edit",
    "GateAttempt",
    "HandleOutput",
    "LedgerObservation",
    "McpEvent",
    "Memory",
    "MemoryRecall",
    "MemorySnapshot",
    "PendingApproval",
    "PendingQuestion",
    "Plan",
    "PolicyEvent",
    "ProcessHandle",
    "ProviderCall",
    "Rewind",
    "Run",
    "RunEvent",
    "RunLease",
    "RunOutcome",
    "RunPolicy",
    "SandboxEvent",
    "ServerToolCall",
    "Session",
    "SessionTurn",
    "Snapshot",
    "Spawn",
    "Step",
    "StepTurn",
    "Summary",
    "Todo",
    "ToolAttempt",
    "rowid_key",
    "table_of",
]

UPSTREAM_TABLES: tuple[str, ...] = tuple(
    table for release in RELEASES for table in release.new_tables
)
"""Every table of the newest io-harness release, in the order releases added them."""

HARNESS_INDEXES: tuple[str, ...] = tuple(
    str(index.name)
    for table in Base.metadata.tables.values()
    for index in table.indexes
    if str(index.name).startswith("hs_")
)
"""Indexes harness_store adds beyond upstream (revisions hs1 and hs2, less those an upstream
index made redundant since); upstream never reads them."""


def table_of(model: type[Base]) -> Table:
    """The Core `Table` behind a model (typed, for Core statements on hot paths)."""
    return Base.metadata.tables[model.__tablename__]
