"""Sessions: conversations as trees of turns, each turn answered by a run (0.20, 0.37).

A session points at its head turn; a new turn names its parent, so a session can branch. The
conditional head move (`set_session_head_if`) is a compare-and-set in one statement: of two
writers that read the same head, exactly one moves it and the other gets `HeadConflictError`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select, update

from .. import models as m
from ..errors import HeadConflictError
from ..formats import i64, opt_text, text
from ..records import Turn
from .marks import reads, writes
from .release_tables import OlderStoreMixin


def turn_row(*r: Any) -> Turn:
    return Turn(int(r[0]), int(r[1]), r[2], int(r[3]), r[4], r[5], r[6], r[7])


def _turn_columns() -> tuple[Any, ...]:
    t = m.SessionTurn
    return (
        t.id,
        t.session_id,
        t.parent_turn_id,
        t.run_id,
        t.prompt,
        t.reply,
        t.outcome,
        t.created_at,
    )


def opt_i64(value: int | None, name: str) -> int | None:
    return None if value is None else i64(value, name)


class SessionsMixin(OlderStoreMixin):
    """Upstream's `sessions.rs`, first half: sessions, heads and turns."""

    @writes
    def create_session(self, root: str) -> int:
        """Open a session rooted at a directory; return its id."""
        s = m.Session
        statement = insert(s).values(root=text(root, "root")).returning(s.id)
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @reads
    def session_root(self, session_id: int) -> str | None:
        """The directory a session is rooted at, or None for no such session."""
        if self._lacks("sessions"):
            return None
        value = self._scalar(select(m.Session.root).where(m.Session.id == session_id))
        return None if value is None else str(value)

    @reads
    def session_head(self, session_id: int) -> int | None:
        """The session's newest turn, or None (no turn yet, or no such session)."""
        if self._lacks("sessions"):
            return None
        value = self._scalar(select(m.Session.head_turn_id).where(m.Session.id == session_id))
        return None if value is None else int(value)

    @writes
    def set_session_head(self, session_id: int, turn_id: int | None) -> None:
        """Point the session at a turn (None: before its first turn), unconditionally."""
        s = m.Session
        with self._write() as conn:
            conn.execute(
                update(s).where(s.id == session_id).values(head_turn_id=opt_i64(turn_id, "turn_id"))
            )

    @writes
    def set_session_head_if(
        self, session_id: int, expected: int | None, turn_id: int | None
    ) -> None:
        """Move the head to `turn_id` only while it is still `expected` (None matches a
        session with no head): `HeadConflictError` when another writer moved it first, or
        the session does not exist. The check and the move are one statement."""
        s = m.Session
        head = s.head_turn_id
        matches = head.is_(None) if expected is None else head == expected
        with self._write() as conn:
            moved = conn.execute(
                update(s)
                .where(s.id == session_id, matches)
                .values(head_turn_id=opt_i64(turn_id, "turn_id"))
            ).rowcount
        if moved == 0:
            raise HeadConflictError(
                f"session {session_id}: the head is no longer {expected} (another writer moved "
                "it, or there is no such session); nothing was changed"
            )

    @writes
    def record_turn(
        self, session_id: int, parent_turn_id: int | None, run_id: int, prompt: str
    ) -> int:
        """Record a turn of a session answered by `run_id`; return its id. The head does not
        move: that is the caller's `set_session_head_if`."""
        t = m.SessionTurn
        statement = (
            insert(t)
            .values(
                session_id=session_id,
                parent_turn_id=opt_i64(parent_turn_id, "parent_turn_id"),
                run_id=run_id,
                prompt=text(prompt, "prompt"),
            )
            .returning(t.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @writes
    def finish_turn(self, turn_id: int, reply: str | None, outcome: str) -> None:
        """Record a turn's reply (None when it gave none) and outcome."""
        t = m.SessionTurn
        with self._write() as conn:
            conn.execute(
                update(t)
                .where(t.id == turn_id)
                .values(reply=opt_text(reply, "reply"), outcome=text(outcome, "outcome"))
            )

    @reads
    def session_turn(self, turn_id: int) -> Turn | None:
        """One turn by id."""
        if self._lacks("session_turns"):
            return None
        found = self._rows(select(*_turn_columns()).where(m.SessionTurn.id == turn_id), turn_row)
        return found[0] if found else None

    @reads
    def turn_for_run(self, run_id: int) -> int | None:
        """The turn a run answered, if it answered one."""
        if self._lacks("session_turns"):
            return None
        t = m.SessionTurn
        value = self._scalar(select(t.id).where(t.run_id == run_id).order_by(t.id).limit(1))
        return None if value is None else int(value)

    @reads
    def session_turns(self, session_id: int) -> list[Turn]:
        """Every turn of a session, in the order recorded."""
        if self._lacks("session_turns"):
            return []
        t = m.SessionTurn
        return self._rows(
            select(*_turn_columns()).where(t.session_id == session_id).order_by(t.id), turn_row
        )
