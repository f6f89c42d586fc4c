"""The records the Store takes and returns: plain frozen dataclasses with upstream's fields.

Field names, defaults and named constructors follow io-harness 0.13's `state.rs`, so code
written against the Rust API reads the same in Python: `StepRecord.new(1, "act", "ok")`,
`PolicyEvent.refusal(2, "write", "secrets/key.txt").with_rule("secrets/*", "base")`. Builders
(`with_*`, `at_step`) return a new record; records are never mutated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Any, Generic, Self, TypeVar

T = TypeVar("T")


class _Constructor(Generic[T]):
    """A classmethod that shares its name with a field (`PolicyEvent.decision`).

    Read on the class it is the named constructor; read on an instance the field's value
    wins, because the instance's `__dict__` shadows a non-data descriptor.
    """

    def __init__(self, fn: Callable[..., T]) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance: object, owner: type[Any]) -> Callable[..., T]:
        return lambda *args, **kwargs: self.fn(owner, *args, **kwargs)


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
class PolicyEvent:
    """A policy refusal or a human decision on a sensitive action. Never file contents."""

    step: int
    kind: str
    act: str
    target: str
    rule: str | None = None
    layer: str | None = None
    decision: str | None = None
    source: str | None = None
    performed: str | None = None

    @classmethod
    def refusal(cls, step: int, act: str, target: str) -> Self:
        """An action refused by the policy."""
        return cls(step, "refusal", act, target)

    def with_rule(self, rule: str, layer: str) -> Self:
        """Attribute the event to the rule and layer that produced it."""
        return replace(self, rule=rule, layer=layer)

    def with_performed(self, performed: str) -> Self:
        """Record that the action performed differed from the one requested."""
        return replace(self, performed=performed)


def _policy_decision(
    cls: type[PolicyEvent], step: int, act: str, target: str, decision: str, source: str
) -> PolicyEvent:
    """A human (or built-in approver) decision on a sensitive action."""
    return cls(step, "decision", act, target, decision=decision, source=source)


# `decision` is both a field and upstream's named constructor: see `_Constructor`.
PolicyEvent.decision = _Constructor(_policy_decision)  # type: ignore[assignment]


@dataclass(frozen=True)
class Pending:
    """An action paused for a human decision, persisted so it outlives the process."""

    id: int
    run_id: int
    step: int
    act: str
    target: str
    content: str | None = None
    resolved: str | None = None


@dataclass(frozen=True)
class AgentEvent:
    """A spawn, a refused spawn, or a draw on the tree's shared budget."""

    run_id: int
    step: int
    kind: str
    child_run_id: int | None = None
    detail: str | None = None
    tokens: int | None = None
    remaining: int | None = None

    @classmethod
    def spawn(cls, run_id: int, step: int, child_run_id: int, goal: str) -> Self:
        """A parent spawned a child."""
        return cls(run_id, step, "spawn", child_run_id=child_run_id, detail=goal)

    @classmethod
    def spawn_refused(cls, run_id: int, step: int, cap: str) -> Self:
        """A spawn was refused by the containment boundary."""
        return cls(run_id, step, "spawn_refused", detail=cap)

    @classmethod
    def budget_draw(cls, run_id: int, step: int, tokens: int, remaining: int) -> Self:
        """An agent drew `tokens` against the tree, leaving `remaining`."""
        return cls(run_id, step, "budget_draw", tokens=tokens, remaining=remaining)


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


@dataclass(frozen=True)
class MemoryEntry:
    """One durable memory entry of a workspace, with the run and step that wrote it; its
    kind (`fact` or `decision`) and whether a person pinned it (0.30)."""

    key: str
    value: str
    run_id: int
    step: int
    created_at: str
    kind: str = "fact"
    pinned: bool = False


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
class SpawnRow:
    """A spawned child's contract, enough to resume that exact child on a tree resume."""

    child_run_id: int
    goal: str
    verify_file: str
    needle: str
    max_steps: int | None = None
    deny_write: str = "[]"
    as_name: str = ""
    """The name the child was given in its tree (0.60); '' for a child spawned before."""


@dataclass(frozen=True)
class TreeNode:
    """One run of a tree as a dashboard needs it (harness_store's `Store.tree`)."""

    run_id: int
    parent_run_id: int | None
    depth: int
    goal: str
    status: str
    outcome: str | None
    steps: int
    """`MAX(step)` of the run: its progress, as upstream's summaries count it."""
    tokens: int
    """`SUM(steps.tokens)` of this run alone."""
    started_at: str | None
