"""Records of agent trees: agent events, spawned-child contracts, tree nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self


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
    messages: int = 0
    """Messages sent to this agent through the tree's mailbox (0.60)."""
    unread: int = 0
    """Of those, how many it has not read yet."""
    queued: int = 0
    """Children queued under this agent, waiting to be spawned (0.32)."""


@dataclass(frozen=True)
class AgentMessage:
    """A message one agent of a tree sent another (0.60), and when the recipient read it."""

    id: int
    from_run_id: int
    to_run_id: int
    from_name: str
    step: int
    body: str
    sent_at: str
    read_at: str | None


@dataclass(frozen=True)
class ProcessHandle:
    """A background process an agent started (0.25): its command line, pids, state
    (`running`, `exited`, `killed`, `orphaned` …), exit code and why it ended."""

    handle: int
    step: int
    line: str
    pids: list[int]
    state: str
    code: int | None
    reason: str | None
