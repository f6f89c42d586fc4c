"""Records of a run's trace: sandbox, checkpoint, MCP and context events, and the ledger."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Self


class ObsKind(StrEnum):
    """What an observation was; stored as its snake_case name, as upstream's serde does."""

    READ = "read"
    GREP = "grep"
    FIND = "find"
    WRITE = "write"
    SKILL = "skill"
    TOOL = "tool"
    MCP = "mcp"
    CHILD = "child"
    MESSAGE = "message"
    ERROR = "error"


@dataclass(frozen=True)
class SandboxEvent:
    """One event in a sandboxed execution's life; `detail` is a command line, never contents."""

    run_id: int
    step: int
    kind: str
    backend: str | None = None
    detail: str | None = None

    @classmethod
    def create(cls, run_id: int, step: int, backend: str) -> Self:
        """A sandbox was created for a run, isolated by `backend`."""
        return cls(run_id, step, "create", backend=backend)

    @classmethod
    def exec(cls, run_id: int, step: int, backend: str, argv: str) -> Self:
        """A command ran in the sandbox under `backend`."""
        return cls(run_id, step, "exec", backend=backend, detail=argv)

    @classmethod
    def cap_hit(cls, run_id: int, step: int, cap: str) -> Self:
        """A resource cap killed the run."""
        return cls(run_id, step, "cap_hit", detail=cap)

    @classmethod
    def destroy(cls, run_id: int, step: int) -> Self:
        """The sandbox was torn down."""
        return cls(run_id, step, "destroy")

    @classmethod
    def gate_phase_failed(cls, run_id: int, step: int, phase: str) -> Self:
        """Which phase of an execution gate failed (`subject-compile`, `test-run`, …)."""
        return cls(run_id, step, "gate_phase_failed", detail=phase)


@dataclass(frozen=True)
class CheckpointEvent:
    """A checkpoint, resume or skipped-step marker of a run."""

    run_id: int
    step: int
    kind: str
    detail: str | None = None

    @classmethod
    def checkpoint(cls, run_id: int, step: int) -> Self:
        """A step was durably checkpointed."""
        return cls(run_id, step, "checkpoint")

    @classmethod
    def resume(cls, run_id: int, step: int, detail: str) -> Self:
        """A run was resumed, re-driving from `step`."""
        return cls(run_id, step, "resume", detail=detail)

    @classmethod
    def skipped(cls, run_id: int, step: int) -> Self:
        """An already-committed step was skipped on resume."""
        return cls(run_id, step, "skipped")


@dataclass(frozen=True)
class McpEvent:
    """One event of an MCP conversation. `step` is 0 for connect/discover (before step 1)."""

    step: int
    kind: str
    server: str
    tool: str | None = None
    ok: bool | None = None
    millis: int | None = None
    detail: str | None = None

    @classmethod
    def connected(cls, server: str, transport: str) -> Self:
        """A server connected over `transport`."""
        return cls(0, "connected", server).with_detail(transport)

    @classmethod
    def discovered(cls, server: str, tool: str) -> Self:
        """A server offered a tool, under its namespaced name."""
        return cls(0, "discovered", server, tool=tool)

    @classmethod
    def called(cls, server: str, tool: str, ok: bool) -> Self:
        """A tool was called, and whether it worked."""
        return cls(0, "called", server, tool=tool, ok=ok)

    @classmethod
    def disconnected(cls, server: str) -> Self:
        """A server was disconnected."""
        return cls(0, "disconnected", server)

    def at_step(self, step: int) -> Self:
        """The same event, on `step`."""
        return replace(self, step=step)

    def with_millis(self, millis: int) -> Self:
        """The same event, with a duration in milliseconds."""
        return replace(self, millis=millis)

    def with_detail(self, detail: str) -> Self:
        """The same event with a short note; an empty note is dropped, not stored blank."""
        return replace(self, detail=detail or None)


@dataclass(frozen=True)
class ContextEvent:
    """One decision of the context assembler: a turn's section, a re-read, a memory event…"""

    step: int
    kind: str
    detail: str | None = None
    est_tokens: int | None = None
    reported_tokens: int | None = None

    @classmethod
    def assembled(cls, step: int, detail: str, est_tokens: int) -> Self:
        """The section built for one turn."""
        return cls(step, "assembled", detail, est_tokens=est_tokens)

    @classmethod
    def reread(cls, step: int, detail: str) -> Self:
        """A stale read was re-read at assembly time."""
        return cls(step, "reread", detail)

    @classmethod
    def reread_refused(cls, step: int, detail: str) -> Self:
        """A stale read could not be re-read."""
        return cls(step, "reread_refused", detail)

    @classmethod
    def memory_write(cls, step: int, detail: str) -> Self:
        """The agent recorded a durable note for later runs."""
        return cls(step, "memory_write", detail)

    @classmethod
    def memory_evict(cls, step: int, detail: str) -> Self:
        """A note was dropped to hold the workspace's memory caps."""
        return cls(step, "memory_evict", detail)

    @classmethod
    def memory_recall(cls, step: int, detail: str) -> Self:
        """Notes from earlier runs were carried into this turn's context."""
        return cls(step, "memory_recall", detail)

    @classmethod
    def served(cls, step: int, provider: str) -> Self:
        """Which provider actually answered this step."""
        return cls(step, "served", provider)

    @classmethod
    def replan(cls, step: int, detail: str) -> Self:
        """The agent made no progress and was told once to change approach."""
        return cls(step, "replan", detail)

    @classmethod
    def stalled(cls, step: int, detail: str) -> Self:
        """The agent made no progress again and the run ends here."""
        return cls(step, "stalled", detail)


@dataclass(frozen=True)
class Observation:
    """One entry of a run's observation ledger: step, kind, target, and the text shown."""

    step: int
    kind: ObsKind
    target: str | None
    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.kind, ObsKind):
            object.__setattr__(self, "kind", ObsKind(self.kind))
