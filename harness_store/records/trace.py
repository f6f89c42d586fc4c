"""Records of a run's trace: sandbox, checkpoint, MCP and context events, the ledger, edits
and their hunks, snapshots, rewinds, citations, server tool calls, gate attempts, step turns,
the tool-attempt journal and the event stream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Self


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


# --- edits, snapshots and rewinds (0.18, 0.28, 0.36, hunks 0.51) ----------------------------

CONTEXT_LINES = 3
"""Unchanged lines a stored hunk shows either side of a change, as `diff -u`."""

NO_NEWLINE = "\\ No newline at end of file"
"""The unified-diff marker for a side whose last line has no terminator."""

MAX_HUNK_CHARS = 1 << 20
"""A rendered hunk longer than this (upstream: bytes of UTF-8) is not stored."""


def _split_lines(body: str) -> tuple[list[str], bool]:
    """`body` cut on `\\n` (a `\\r` stays on its line) and whether it ended with one."""
    if not body:
        return [], True
    ends = body.endswith("\n")
    lines = body.split("\n")
    if ends:
        lines.pop()
    return lines, ends


def render_hunk(old: str, new: str) -> str | None:
    """The change from `old` to `new` as one unified-diff hunk, as io-harness 0.51 stores it
    with an edit: the common head and tail walked off, three lines of context, a line's
    identity including whether it is terminated. None when nothing changed."""
    if old == new:
        return None
    a, a_nl = _split_lines(old)
    b, b_nl = _split_lines(new)

    def a_bare(i: int) -> bool:
        return not a_nl and i + 1 == len(a)

    def b_bare(j: int) -> bool:
        return not b_nl and j + 1 == len(b)

    def same(i: int, j: int) -> bool:
        return a[i] == b[j] and a_bare(i) == b_bare(j)

    head = 0
    while head < len(a) and head < len(b) and same(head, head):
        head += 1
    tail = 0
    while (
        tail < len(a) - head and tail < len(b) - head and same(len(a) - 1 - tail, len(b) - 1 - tail)
    ):
        tail += 1
    before = max(head - CONTEXT_LINES, 0)
    a_after = min(len(a) - tail + CONTEXT_LINES, len(a))
    b_after = min(len(b) - tail + CONTEXT_LINES, len(b))
    body: list[tuple[str, str, bool]] = [(" ", a[i], a_bare(i)) for i in range(before, head)]
    body += [("-", a[i], a_bare(i)) for i in range(head, len(a) - tail)]
    body += [("+", b[j], b_bare(j)) for j in range(head, len(b) - tail)]
    body += [(" ", a[i], a_bare(i)) for i in range(len(a) - tail, a_after)]
    a_count, b_count = a_after - before, b_after - before
    a_start = before if a_count == 0 else before + 1
    b_start = before if b_count == 0 else before + 1
    out = [f"@@ -{a_start},{a_count} +{b_start},{b_count} @@\n"]
    for mark, line, bare in body:
        out.append(f"{mark}{line}\n")
        if bare:
            out.append(NO_NEWLINE + "\n")
    return "".join(out)


def _rust_lines(body: str) -> list[str]:
    """`str::lines` of Rust: split on `\\n`, one trailing `\\r` dropped per line, no empty
    last line for a terminated text."""
    lines = body.split("\n")
    last = lines.pop()  # the text after the last newline: no terminator, nothing stripped
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return [*lines, last] if last else lines


@dataclass(frozen=True)
class Edit:
    """One file change a tool made: lines added and removed, and from 0.51 the unified-diff
    hunk it made (None for an older row, or a change too large to keep)."""

    step: int
    tool: str
    path: str
    lines_added: int
    lines_removed: int
    hunk: str | None = None

    @classmethod
    def measure(cls, step: int, tool: str, path: str, old: str, new: str) -> Self:
        """Count the lines `new` adds and removes against `old`, as upstream counts them (the
        common head and tail walked off; no hunk yet)."""
        a, b = _rust_lines(old), _rust_lines(new)
        head = 0
        while head < min(len(a), len(b)) and a[head] == b[head]:
            head += 1
        tail = 0
        while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
            tail += 1
        return cls(step, tool, path, len(b) - head - tail, len(a) - head - tail)

    def with_hunk(self, before: str, after: str) -> Self:
        """The same edit carrying the hunk from `before` to `after` (dropped when over 1 MiB
        of UTF-8, as upstream drops it)."""
        hunk = render_hunk(before, after)
        if hunk is not None and len(hunk.encode("utf-8")) > MAX_HUNK_CHARS:
            hunk = None
        return replace(self, hunk=hunk)


@dataclass(frozen=True)
class Snapshot:
    """A file as it was before a run first changed it (0.28): `state` is `text` (its content
    in `before`), `absent` (it did not exist) or `unkept` (`before` says why not)."""

    step: int
    path: str
    state: str
    before: str | None = None

    @classmethod
    def text(cls, step: int, path: str, content: str) -> Self:
        """The file existed with `content`."""
        return cls(step, path, "text", content)

    @classmethod
    def absent(cls, step: int, path: str) -> Self:
        """The file did not exist."""
        return cls(step, path, "absent")

    @classmethod
    def unkept(cls, step: int, path: str, why: str) -> Self:
        """The content was not kept (too large, binary…), and why."""
        return cls(step, path, "unkept", why)


@dataclass(frozen=True)
class RewindRecord:
    """One rewind of a run (0.36): when, the files put back, memory keys restored and removed,
    the goals of queued children cleared, and from 0.51 the step it undid."""

    at: str
    files: tuple[str, ...]
    memory_restored: tuple[str, ...]
    memory_removed: tuple[str, ...]
    queue_cleared: tuple[str, ...]
    undid_step: int | None = None


# --- what the provider did on its side (0.22) ------------------------------------------------


@dataclass(frozen=True)
class Citation:
    """A source a completion cited: URL, title and quoted text, verbatim."""

    url: str
    title: str | None = None
    cited_text: str | None = None


@dataclass(frozen=True)
class ServerToolCall:
    """A tool the provider ran itself (a web search…), with its error if it failed."""

    provider: str
    tool: str
    error: str | None = None

    @classmethod
    def ok(cls, provider: str, tool: str) -> Self:
        """A call that worked."""
        return cls(provider, tool)

    @classmethod
    def failed(cls, provider: str, tool: str, error: str) -> Self:
        """A call that failed inside an otherwise good response."""
        return cls(provider, tool, error)

    def succeeded(self) -> bool:
        """Whether the call worked."""
        return self.error is None


# --- gates, turns and the journal (0.34, 0.64, 0.65) -----------------------------------------


class GateOutcome(StrEnum):
    """How one gate evaluation ended; an unknown stored value reads as `ERRORED`."""

    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"

    @classmethod
    def parse(cls, value: str) -> GateOutcome:
        """Upstream's reading of the stored string."""
        try:
            return cls(value)
        except ValueError:
            return cls.ERRORED

    def is_retryable(self) -> bool:
        """An errored gate never judged the work, so retrying it is honest."""
        return self is GateOutcome.ERRORED


@dataclass(frozen=True)
class GateAttempt:
    """One evaluation of a gate phase and how it ended."""

    id: int
    step: int
    phase: str
    outcome: GateOutcome
    detail: str
    at: str


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an assistant turn: its name and its JSON arguments."""

    name: str
    arguments: Any


@dataclass(frozen=True)
class AssistantTurn:
    """What a step asked for — the model's text and tool calls — kept so a resume sends the
    same turn back (0.64)."""

    step: int
    text: str | None
    calls: tuple[ToolCall, ...] = ()

    @classmethod
    def new(cls, step: int, text: str | None, calls: Sequence[ToolCall]) -> Self:
        """A turn of `step` with its text and calls."""
        return cls(step, text, tuple(calls))


class ToolRecovery(StrEnum):
    """Whether a tool call can simply be run again after a crash (0.65): `REPLAYABLE` calls
    are not journalled; `INDETERMINATE` ones open a tool attempt."""

    REPLAYABLE = "replayable"
    INDETERMINATE = "indeterminate"


@dataclass(frozen=True)
class ToolAttempt:
    """A journalled tool call that started and, while listed by `open_attempts`, never
    finished."""

    id: int
    run_id: int
    step: int
    tool: str
    started_at: str


# --- the durable event stream (0.33) ---------------------------------------------------------


@dataclass(frozen=True)
class RunEvent:
    """One event of a run's stream: where it came from (run, step, tree depth), its kind (the
    `event` tag of upstream's JSON: `started`, `step`, `stalled`…) and the kind's fields in
    order. Stored as upstream's JSON, so either side reads the other's events."""

    run_id: int
    step: int
    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    depth: int = 0

    @classmethod
    def new(cls, run_id: int, step: int, kind: str, /, **fields: Any) -> Self:
        """An event at the root of a tree (depth 0)."""
        return cls(run_id, step, kind, dict(fields))

    @classmethod
    def at_depth(cls, run_id: int, step: int, depth: int, kind: str, /, **fields: Any) -> Self:
        """An event of a run `depth` levels down a tree."""
        return cls(run_id, step, kind, dict(fields), depth)

    def __hash__(self) -> int:
        return hash((self.run_id, self.step, self.depth, self.kind))
