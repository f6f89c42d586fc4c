"""Cross-run memory and a run's working notes: memory entries, recalls, memory snapshots for
rewinds, the todo list and folded summaries (io-harness 0.10, 0.21, 0.30, 0.36, 0.43)."""

from __future__ import annotations

from sqlalchemy import Index, UniqueConstraint
from sqlalchemy.orm import Mapped

from .base import AUTOINCREMENT, Base, dated, defaulted, rowid_key, stamped


class Memory(Base):
    """Durable cross-run memory, keyed to a workspace (0.10); a `kind` and a `pinned` flag that
    eviction honours from 0.30. Capped per workspace; ids may be reused (no AUTOINCREMENT)."""

    __tablename__ = "memory"
    __table_args__ = (UniqueConstraint("workspace", "key"),)

    id: Mapped[int] = rowid_key()
    workspace: Mapped[str]
    key: Mapped[str]
    value: Mapped[str]
    run_id: Mapped[int]
    step: Mapped[int]
    created_at: Mapped[str]
    kind: Mapped[str | None]
    pinned: Mapped[int | None]


class MemoryRecall(Base):
    """One recall of a memory entry by a run (0.30); eviction ranks entries by recalls from
    0.56, which indexes them by entry."""

    __tablename__ = "memory_recalls"
    __table_args__ = (
        Index("memory_recalls_run", "run_id"),
        Index("memory_recalls_entry", "workspace", "key"),
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    workspace: Mapped[str]
    key: Mapped[str]
    at: Mapped[str] = dated()


class MemorySnapshot(Base):
    """A memory entry as it was before a run first changed it, once per (run, workspace, key),
    so a rewind can restore it (0.36)."""

    __tablename__ = "memory_snapshots"
    __table_args__ = (
        Index("memory_snapshots_entry", "run_id", "workspace", "key", unique=True),
        AUTOINCREMENT,
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    workspace: Mapped[str]
    key: Mapped[str]
    step: Mapped[int]
    before: Mapped[str | None]
    kind: Mapped[str | None]
    state: Mapped[str]
    at: Mapped[str] = dated()


class Todo(Base):
    """One item of a run's todo list, by position, with its state (0.21)."""

    __tablename__ = "todos"
    __table_args__ = (Index("todos_run", "run_id", "position"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    position: Mapped[int]
    text: Mapped[str]
    state: Mapped[str]
    written_at: Mapped[str] = stamped()


class Summary(Base):
    """A summary that folds a run's history through a step into text, with its token estimate
    (0.43)."""

    __tablename__ = "summaries"
    __table_args__ = (Index("summaries_run", "run_id", "folded"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    through_step: Mapped[int]
    folded: Mapped[int]
    text: Mapped[str]
    est_tokens: Mapped[int] = defaulted("0")
    at: Mapped[str] = stamped()
