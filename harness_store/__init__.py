"""harness_store: io-harness run stores in Python — SQLAlchemy models, the Alembic chain of
upstream releases 0.1 → 0.13, and `Store`, upstream's Store API over SQLite or PostgreSQL."""

from __future__ import annotations

from .errors import (
    ResumeError,
    SchemaError,
    StoreError,
)
from .formats import (
    CHECKPOINT_FORMAT,
    MEMORY_MAX_CHARS,
    MEMORY_MAX_ENTRIES,
    MEMORY_MAX_ENTRY_CHARS,
    SUCCESS_OUTCOME,
)
from .records import (
    AgentEvent,
    CheckpointEvent,
    ContextEvent,
    McpEvent,
    MemoryEntry,
    Observation,
    ObsKind,
    Pending,
    PolicyEvent,
    RunStatus,
    RunSummary,
    SandboxEvent,
    SpawnRow,
    StepRecord,
    TreeNode,
)
from .store import Store
from .transfer import CopyReport, copy_store

__version__ = "0.1.0"

__all__ = [
    "CHECKPOINT_FORMAT",
    "MEMORY_MAX_CHARS",
    "MEMORY_MAX_ENTRIES",
    "MEMORY_MAX_ENTRY_CHARS",
    "SUCCESS_OUTCOME",
    "AgentEvent",
    "CheckpointEvent",
    "ContextEvent",
    "CopyReport",
    "McpEvent",
    "MemoryEntry",
    "ObsKind",
    "Observation",
    "Pending",
    "PolicyEvent",
    "ResumeError",
    "RunStatus",
    "RunSummary",
    "SandboxEvent",
    "SchemaError",
    "SpawnRow",
    "StepRecord",
    "Store",
    "StoreError",
    "TreeNode",
    "copy_store",
]
