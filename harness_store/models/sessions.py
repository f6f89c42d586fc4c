"""Conversational sessions: a session per workspace root and its tree of turns, each turn a run
(io-harness 0.20; turns indexed by session from 0.58)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Index
from sqlalchemy.orm import Mapped, relationship

from .base import AUTOINCREMENT, Base, rowid_key, stamped

if TYPE_CHECKING:
    from .runs import Run


class Session(Base):
    """A conversation rooted at a directory, pointing at its newest turn (0.20)."""

    __tablename__ = "sessions"
    __table_args__ = (AUTOINCREMENT,)

    id: Mapped[int] = rowid_key()
    root: Mapped[str]
    head_turn_id: Mapped[int | None]
    created_at: Mapped[str] = stamped()

    turns: Mapped[list[SessionTurn]] = relationship(
        primaryjoin="Session.id == foreign(SessionTurn.session_id)",
        order_by="SessionTurn.id",
        viewonly=True,
    )
    head: Mapped[SessionTurn | None] = relationship(
        primaryjoin="foreign(Session.head_turn_id) == SessionTurn.id", viewonly=True
    )


class SessionTurn(Base):
    """One turn of a session: the prompt, the run that answered it, its reply and outcome; the
    parent turn makes the session a tree (0.20)."""

    __tablename__ = "session_turns"
    __table_args__ = (Index("session_turns_session", "session_id"), AUTOINCREMENT)

    id: Mapped[int] = rowid_key()
    session_id: Mapped[int]
    parent_turn_id: Mapped[int | None]
    run_id: Mapped[int]
    prompt: Mapped[str]
    reply: Mapped[str | None]
    outcome: Mapped[str | None]
    created_at: Mapped[str] = stamped()

    run: Mapped[Run] = relationship(
        primaryjoin="foreign(SessionTurn.run_id) == Run.id", viewonly=True
    )
    parent: Mapped[SessionTurn | None] = relationship(
        primaryjoin="foreign(SessionTurn.parent_turn_id) == remote(SessionTurn.id)", viewonly=True
    )
