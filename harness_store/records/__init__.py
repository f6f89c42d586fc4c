"""The records the Store takes and returns: plain frozen dataclasses with upstream's fields.

Field names, defaults and named constructors follow io-harness's Store, so code written
against the Rust API reads the same in Python: `StepRecord.new(1, "act", "ok")`,
`PolicyEvent.refusal(2, "write", "secrets/key.txt").with_rule("secrets/*", "base")`. Builders
(`with_*`, `at_step`) return a new record; records are never mutated. One module per concern,
as the Store's own modules: runs, trace, approvals, agents, memory, sessions.
"""

from .agents import AgentEvent, AgentMessage, ProcessHandle, SpawnRow, TreeNode
from .approvals import (
    Pending,
    PendingPlan,
    PendingQuestion,
    Plan,
    PlanStep,
    PlanVerdict,
    PolicyEvent,
    Question,
)
from .memory import (
    MemoryEntry,
    MemoryForget,
    MemoryLimits,
    MemoryRecall,
    MemorySnapshot,
    MemoryWrite,
    Summary,
    TodoItem,
    TodoState,
)
from .runs import RunStatus, RunSummary, StepRecord
from .sessions import Archived, Pruned, SessionSize, StoreSize, Turn
from .trace import CheckpointEvent, ContextEvent, McpEvent, Observation, ObsKind, SandboxEvent

__all__ = [
    "AgentEvent",
    "AgentMessage",
    "Archived",
    "CheckpointEvent",
    "ContextEvent",
    "McpEvent",
    "MemoryEntry",
    "MemoryForget",
    "MemoryLimits",
    "MemoryRecall",
    "MemorySnapshot",
    "MemoryWrite",
    "ObsKind",
    "Observation",
    "Pending",
    "PendingPlan",
    "PendingQuestion",
    "Plan",
    "PlanStep",
    "PlanVerdict",
    "PolicyEvent",
    "ProcessHandle",
    "Pruned",
    "Question",
    "RunStatus",
    "RunSummary",
    "SandboxEvent",
    "SessionSize",
    "SpawnRow",
    "StepRecord",
    "StoreSize",
    "Summary",
    "TodoItem",
    "TodoState",
    "TreeNode",
    "Turn",
]
