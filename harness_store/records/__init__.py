"""The records the Store takes and returns: plain frozen dataclasses with upstream's fields.

Field names, defaults and named constructors follow io-harness's Store, so code written
against the Rust API reads the same in Python: `StepRecord.new(1, "act", "ok")`,
`PolicyEvent.refusal(2, "write", "secrets/key.txt").with_rule("secrets/*", "base")`. Builders
(`with_*`, `at_step`) return a new record; records are never mutated. One module per concern,
as the Store's own modules: runs, trace, approvals, agents, memory.
"""

from .agents import AgentEvent, SpawnRow, TreeNode
from .approvals import Pending, PolicyEvent
from .memory import MemoryEntry
from .runs import RunStatus, RunSummary, StepRecord
from .trace import CheckpointEvent, ContextEvent, McpEvent, Observation, ObsKind, SandboxEvent

__all__ = [
    "AgentEvent",
    "CheckpointEvent",
    "ContextEvent",
    "McpEvent",
    "MemoryEntry",
    "ObsKind",
    "Observation",
    "Pending",
    "PolicyEvent",
    "RunStatus",
    "RunSummary",
    "SandboxEvent",
    "SpawnRow",
    "StepRecord",
    "TreeNode",
]
