"""Records of runs and steps: a run's status, a checkpointed step, a run's summary, and a
run's trace read back as one (its header and its entries in order)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Self

from ..formats import JSON, step_tool_calls

if TYPE_CHECKING:
    from .trace import ToolCall


class RunStatus(Enum):
    """A run's durable lifecycle status; a crashed run is still `RUNNING` (the resume target)."""

    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"

    @classmethod
    def from_str(cls, value: str) -> RunStatus:
        """Upstream's reading: an unknown status string reads as `RUNNING`."""
        try:
            return cls(value)
        except ValueError:
            return cls.RUNNING


FINISHED_STATUSES = (RunStatus.COMPLETED.value, RunStatus.FAILED.value)
"""The statuses a run ends in, as the store writes them. Every other status can still resume:
paused (awaiting an approval or a plan), running, and any status upstream does not know, which
it reads as running. Retention deletes, and the exporter ships as final, only these."""


@dataclass(frozen=True)
class StepRecord:
    """One trace entry of a run: what was decided, what came of it, and its audit fields."""

    step: int
    decision: str
    result: str
    prompt: str = ""
    tool_call: str = ""
    tokens: int = 0

    @classmethod
    def new(cls, step: int, decision: str, result: str) -> Self:
        """A trace entry with the audit fields empty."""
        return cls(step, decision, result)

    def with_trace(self, prompt: str, tool_call: str, tokens: int) -> Self:
        """The same entry with its prompt, tool call and token count."""
        return replace(self, prompt=prompt, tool_call=tool_call, tokens=tokens)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The step's tool calls, read from `tool_call` by upstream's grammar (several calls
        joined by `" | "`), each with its arguments parsed from JSON; empty when the step
        called no tool or its `tool_call` is not in upstream's form (it stays as written)."""
        from .trace import ToolCall

        calls = step_tool_calls(self.tool_call) or ()
        return tuple(ToolCall(name, JSON.decode(arguments)) for name, arguments in calls)


@dataclass(frozen=True)
class RunSummary:
    """What one finished run cost and whether it worked (a `run_outcomes` row)."""

    run_id: int
    outcome: str
    success: bool
    steps: int
    tokens: int
    duration_ms: int | None
    finished_at: str


@dataclass(frozen=True)
class RunHeader:
    """A run's own row, as a trace is headed: its id and parent (0.60), goal, durable status,
    recorded outcome and start stamp (0.7; None on older stores)."""

    run_id: int
    parent_run_id: int | None
    goal: str
    status: str
    outcome: str | None
    started_at: str | None


@dataclass(frozen=True)
class TraceEntry:
    """One line of a run's trace (`harness-store trace`): a step or one of the events recorded
    at it. `kind` is `step`, `policy`, `approval`, `call` (a provider call, 0.18), `attempt` (a
    tool attempt), `edit`, `gate` (a gate attempt) or `checkpoint`; `seq` is the row's id in its
    own table; `fields` holds the row's columns by name, as JSON shows them.

    `tokens` is what the entry counts toward `Store.spent_tokens`, by the same rule: a step's
    tokens, or in a reply turn (0.37, which commits no steps) a provider call's total tokens;
    None for an entry that counts nothing. So the entries of a whole run sum to its spend."""

    step: int
    kind: str
    seq: int
    tokens: int | None
    fields: Mapping[str, Any] = field(hash=False)


@dataclass(frozen=True)
class RunListing:
    """A run as a listing shows it: its row (id, parent and depth, status, outcome, goal,
    start) and, once finished, its recorded duration and whether it succeeded (`run_outcomes`,
    None before it finished or on a store without outcomes)."""

    run_id: int
    parent_run_id: int | None
    depth: int
    status: str
    outcome: str | None
    started_at: str | None
    duration_ms: int | None
    success: bool | None
    goal: str
