"""Records of runs and steps: a run's status, a checkpointed step, a run's summary."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Self


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
