"""Records of sessions (conversations as trees of turns) and of retention: sizes, what a
deletion or an archive removed, and the store's own size."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Turn:
    """One turn of a session (0.20): the prompt, the run that answered it, its reply and
    outcome once finished; the parent turn makes the session a tree."""

    id: int
    session_id: int
    parent_turn_id: int | None
    run_id: int
    prompt: str
    reply: str | None
    outcome: str | None
    created_at: str


@dataclass(frozen=True)
class SessionSize:
    """What one session holds (0.58): turns, runs (every run of every turn's tree), rows in
    every table, and the characters of their text columns."""

    session_id: int
    turns: int
    runs: int
    rows: int
    bytes: int


@dataclass(frozen=True)
class Pruned:
    """What a deletion removed (0.58); `refused` lists sessions a sweep kept because a run of
    theirs can still resume (for `prune_runs`: the roots of the trees kept because a run of
    theirs is in use). Beyond upstream, and left out of comparisons: `tables`, the rows per
    table, and `run_ids`, the runs (for `prune_runs`)."""

    sessions: int = 0
    turns: int = 0
    runs: int = 0
    rows: int = 0
    bytes: int = 0
    restore_points: int = 0
    refused: list[int] = field(default_factory=list)
    tables: dict[str, int] = field(default_factory=dict, compare=False)
    run_ids: list[int] = field(default_factory=list, compare=False)


@dataclass(frozen=True)
class Archived:
    """What an archive cleared (0.58): the session's turns, the rows whose text was emptied,
    and how many characters went."""

    turns: int = 0
    rows: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class StoreSize:
    """The store's footprint (0.58): file and free bytes, sessions and runs, and the bytes of
    each table and index, largest first (empty where the database cannot say)."""

    file_bytes: int
    free_bytes: int
    sessions: int
    runs: int
    tables: list[tuple[str, int]] = field(default_factory=list)
