"""Records of workspace memory."""

from __future__ import annotations

from dataclasses import dataclass


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
