"""The records the Store takes and returns: plain frozen dataclasses with upstream's fields.

Field names, defaults and named constructors follow io-harness's Store, so code written
against the Rust API reads the same in Python: `StepRecord.new(1, "act", "ok")`,
`PolicyEvent.refusal(2, "write", "secrets/key.txt").with_rule("secrets/*", "base")`. Builders
(`with_*`, `at_step`) return a new record; records are never mutated. One module per concern,
as the Store's own modules: runs, trace, approvals, agents, memory.
"""

from .accounting import (
    MICROS_PER_UNIT,
    NO_KEY,
    UNKNOWN_MODEL,
    FirstTry,
    Price,
    PriceTable,
    PriceTier,
    ProviderCall,
    Recovery,
    Spend,
    Tally,
    Usage,
)
from .agents import AgentEvent, SpawnRow, TreeNode
from .approvals import Pending, PolicyEvent
from .leases import LeaseRow
from .memory import MemoryEntry
from .runs import RunStatus, RunSummary, StepRecord
from .trace import (
    AssistantTurn,
    CheckpointEvent,
    Citation,
    ContextEvent,
    Edit,
    GateAttempt,
    GateOutcome,
    McpEvent,
    Observation,
    ObsKind,
    RewindRecord,
    RunEvent,
    SandboxEvent,
    ServerToolCall,
    Snapshot,
    ToolAttempt,
    ToolCall,
    ToolRecovery,
)

__all__ = [
    "MICROS_PER_UNIT",
    "NO_KEY",
    "UNKNOWN_MODEL",
    "AgentEvent",
    "AssistantTurn",
    "CheckpointEvent",
    "Citation",
    "ContextEvent",
    "Edit",
    "FirstTry",
    "GateAttempt",
    "GateOutcome",
    "LeaseRow",
    "McpEvent",
    "MemoryEntry",
    "ObsKind",
    "Observation",
    "Pending",
    "PolicyEvent",
    "Price",
    "PriceTable",
    "PriceTier",
    "ProviderCall",
    "Recovery",
    "RewindRecord",
    "RunEvent",
    "RunStatus",
    "RunSummary",
    "SandboxEvent",
    "ServerToolCall",
    "Snapshot",
    "SpawnRow",
    "Spend",
    "StepRecord",
    "Tally",
    "ToolAttempt",
    "ToolCall",
    "ToolRecovery",
    "TreeNode",
    "Usage",
]
