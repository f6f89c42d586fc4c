"""Records of workspace memory and a run's working notes: entries, writes, recalls, restore
points, summaries (folds) and todos."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Self

from ..formats import MEMORY_MAX_CHARS, MEMORY_MAX_ENTRIES, MEMORY_MAX_ENTRY_CHARS


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


class MemoryForget(Enum):
    """What `memory_forget` did: removed the entry, refused a pinned one, or found none."""

    REMOVED = "removed"
    PINNED = "pinned"
    ABSENT = "absent"


@dataclass(frozen=True)
class MemoryLimits:
    """The caps one memory write is held to (0.56): entries and characters per workspace, and
    characters per value. The defaults are upstream's constants."""

    max_entries: int = MEMORY_MAX_ENTRIES
    max_chars: int = MEMORY_MAX_CHARS
    max_entry_chars: int = MEMORY_MAX_ENTRY_CHARS


@dataclass(frozen=True)
class MemoryWrite:
    """What `memory_write` did: whether a pin refused it, and the keys evicted to hold the
    caps, in eviction order."""

    refused: bool = False
    evicted: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MemoryRecall:
    """One draw of a run on a memory entry at a step (0.30)."""

    run_id: int
    step: int
    workspace: str
    key: str
    at: str


@dataclass(frozen=True)
class MemorySnapshot:
    """A memory entry as it was before a run first changed it (0.36): its value and kind, or
    `created` when the run's write made it (a rewind then removes it)."""

    workspace: str
    key: str
    before: str | None
    kind: str | None
    step: int
    created: bool


@dataclass(frozen=True)
class Summary:
    """One fold of a run's history (0.43): through which step, how many ledger entries from the
    front it stands in for, its text and estimated tokens."""

    id: int
    through_step: int
    folded: int
    text: str
    est_tokens: int
    at: str


class TodoState(Enum):
    """The state of one item of a run's plan (0.21)."""

    PENDING = "pending"
    ACTIVE = "active"
    DONE = "done"


@dataclass(frozen=True)
class TodoItem:
    """One item of a run's todo list."""

    text: str
    state: TodoState

    @classmethod
    def new(cls, text: str, state: TodoState) -> Self:
        """An item in the given state."""
        return cls(text, state)
