"""Retention (0.58): how big a session is, deleting and sweeping sessions, archiving a
session's words. (How big the store is and compacting it: `store_space`; the tables a run owns
and the statements retention shares: `retention_rows`.)

A session owns every run of every turn's tree (children included), and every row keyed to those
runs in `RUN_TABLES` — the same list upstream deletes from — and harness_store's per-run spend
rows, which a deletion takes too (`run_owned`: the lists `prune_runs` deletes from, in one
order; sizes and counts stay upstream's, without them). A deletion or an archive is one
transaction: all of it or none of it, never an orphan in any table. Sizes count rows and the
characters of text columns (what deleting would free), not pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    and_,
    func,
    select,
    update,
)

from ..models.spend import RUN_SPEND_TABLES
from ..records import Archived, Pruned, SessionSize
from .marks import reads, writes
from .release_tables import OlderStoreMixin
from .retention_rows import (
    RUN_TABLES,
    SNAPSHOTS,
    chunks,
    delete_statement,
    is_fact_column,
    live_runs,
    lock_runs,
    nonempty,
    run_owned,
    table,
    tally,
    text_chars,
    text_columns,
)


class SessionRetentionMixin(OlderStoreMixin):
    """Upstream's `sessions.rs`, second half, but for `store_size` and `compact` (`store_space`)."""

    @staticmethod
    def _session_runs(conn: Any, sessions: Sequence[int]) -> list[int]:
        """Every run of the sessions' turns and their whole trees, ascending."""
        if not sessions:
            return []
        t, r = table("session_turns"), table("runs")
        start = (
            select(t.c.run_id.label("id"))
            .where(t.c.session_id.in_(list(sessions)))
            .cte("tree", recursive=True)
        )
        tree = start.union(select(r.c.id).join(start, r.c.parent_run_id == start.c.id))
        return [int(i) for i in conn.execute(select(tree.c.id).order_by(tree.c.id)).scalars()]

    @staticmethod
    def _count(conn: Any, name: str, key: str, ids: Sequence[int]) -> int:
        t = table(name)
        total = 0
        for part in chunks(ids):
            total += int(
                conn.execute(select(func.count()).select_from(t).where(t.c[key].in_(part))).scalar()
            )
        return total

    @staticmethod
    def _chars(
        conn: Any, name: str, key: str, ids: Sequence[int], columns: Sequence[Any] | None = None
    ) -> int:
        t = table(name)
        cols = text_columns(name) if columns is None else list(columns)
        if not cols:
            return 0
        total = 0
        for part in chunks(ids):
            total += int(conn.execute(select(text_chars(cols)).where(t.c[key].in_(part))).scalar())
        return total

    @reads
    def session_size(self, session_id: int) -> SessionSize | None:
        """What a session holds: turns, runs, rows in every table and characters of text —
        what `delete_session` would remove. None for no such session."""
        if self._lacks("sessions"):
            return None
        s = table("sessions")
        with self._read() as conn:
            if conn.execute(select(s.c.id).where(s.c.id == session_id)).first() is None:
                return None
            runs = self._session_runs(conn, [session_id])
            (turns, turn_chars), (_, session_chars) = tally(conn, "sessions", [session_id])
            rows, chars = turns + 1, turn_chars + session_chars
            if runs:
                counted = tally(conn, "runs", runs)
                rows += sum(n for n, _ in counted)
                chars += sum(c for _, c in counted)
        return SessionSize(session_id, turns, len(runs), rows, chars)

    @writes
    def delete_session(self, session_id: int, *, dry_run: bool = False) -> Pruned:
        """Delete a session, its turns, every run of theirs and every row keyed to those runs,
        in one transaction; say what went. `dry_run=True` says what would go and changes
        nothing (beyond upstream)."""
        return self._prune([session_id], [], dry_run=dry_run)

    @writes
    def sweep_sessions(self, before: str, *, dry_run: bool = False) -> Pruned:
        """Delete every session created before `before` (an ISO date or stamp, compared as
        upstream compares it, as text), except those holding a run that can still resume or
        is in use — running or paused, leased, or awaiting a decision — which are listed in
        `refused`. One transaction: the check is made with the sessions' runs locked, so a run
        another process resumes meanwhile is kept."""
        with self._write() if not dry_run else self._read() as conn:
            doomed, refused = self._sweep_candidates(conn, before, lock=not dry_run)
            return self._prune_in(conn, doomed, refused, dry_run=dry_run)

    @writes
    def sweep_session(self, session_id: int, before: str, *, dry_run: bool = False) -> Pruned:
        """Delete one session if it was created before `before` and no run of its is in use
        (as `sweep_sessions` decides), deciding and deleting in one transaction with its runs
        locked: what `harness-store prune` does session by session. A session it keeps is in
        `refused`; one gone or newer is skipped (nothing counted)."""
        with self._write() if not dry_run else self._read() as conn:
            doomed, refused = self._sweep_candidates(
                conn, before, lock=not dry_run, only=[session_id]
            )
            return self._prune_in(conn, doomed, refused, dry_run=dry_run)

    @reads
    def sweep_candidates(self, before: str) -> tuple[list[int], list[int]]:
        """The sessions `sweep_sessions(before)` would delete, and those it would keep because
        a run of theirs is in use (beyond upstream: what a pruning tool shows first). Only a
        forecast: the sweep decides again under its lock."""
        if self._lacks("sessions"):
            return [], []
        with self._read() as conn:
            return self._sweep_candidates(conn, before, lock=False)

    def _sweep_candidates(
        self, conn: Any, before: str, *, lock: bool, only: Sequence[int] | None = None
    ) -> tuple[list[int], list[int]]:
        s = table("sessions")
        query = select(s.c.id).where(s.c.created_at < before).order_by(s.c.id)
        if only is not None:
            query = query.where(s.c.id.in_(list(only)))
        candidates = [int(i) for i in conn.execute(query).scalars()]
        trees = {session: self._session_runs(conn, [session]) for session in candidates}
        every = sorted({run for runs in trees.values() for run in runs})
        if lock:
            lock_runs(conn, every)
        live = live_runs(conn, self._backend.now(), every)
        doomed: list[int] = []
        refused: list[int] = []
        for session in candidates:
            (refused if live.intersection(trees[session]) else doomed).append(session)
        return doomed, refused

    def _prune(self, sessions: list[int], refused: list[int], *, dry_run: bool) -> Pruned:
        with self._write() if not dry_run else self._read() as conn:
            return self._prune_in(conn, sessions, refused, dry_run=dry_run)

    def _prune_in(
        self, conn: Any, sessions: list[int], refused: list[int], *, dry_run: bool
    ) -> Pruned:
        s = table("sessions")
        found: list[int] = []
        for part in chunks(sessions):
            found += [
                int(i) for i in conn.execute(select(s.c.id).where(s.c.id.in_(part))).scalars()
            ]
        if not found:
            return Pruned(refused=refused)
        runs = self._session_runs(conn, found)
        (turns, turn_chars), (_, session_chars) = tally(conn, "sessions", found)
        rows, chars = turns + len(found), turn_chars + session_chars
        restore_points = 0
        if runs:
            counted = tally(conn, "runs", runs)
            rows += sum(n for n, _ in counted)
            chars += sum(c for _, c in counted)
            restore_points = counted[1 + SNAPSHOTS][0]
        if not dry_run:
            spend = not any(self._lacks(t.name, "run_id") for t in RUN_SPEND_TABLES)
            work = [(name, key, runs) for name, key in run_owned(spend=spend)] if runs else []
            work += [("session_turns", "session_id", found), ("sessions", "id", found)]
            for name, key, ids in work:
                for part in chunks(ids):
                    conn.execute(delete_statement(name, key), {"ids": part})
        return Pruned(len(found), turns, len(runs), rows, chars, restore_points, refused)

    @writes
    def archive_session(self, session_id: int, *, dry_run: bool = False) -> Archived:
        """Keep a session's shape and facts but clear its words: every text column that is not
        a fact (what a row is, what was decided, where, when) of its turns, runs and their
        rows becomes '', and its file restore points are marked archived. One transaction."""
        s = table("sessions")
        with self._write() if not dry_run else self._read() as conn:
            if conn.execute(select(s.c.id).where(s.c.id == session_id)).first() is None:
                return Archived()
            runs = self._session_runs(conn, [session_id])
            turns = self._count(conn, "session_turns", "session_id", [session_id])
            work = [("session_turns", "session_id", [session_id]), ("runs", "id", runs)]
            work += [(name, key, runs) for name, key in RUN_TABLES]
            rows = chars = 0
            for name, key, ids in work:
                if not ids:
                    continue
                t = table(name)
                cols = [c for c in text_columns(name) if not is_fact_column(name, c.name)]
                if not cols:
                    continue
                cleared = 0
                for part in chunks(ids):
                    where = and_(t.c[key].in_(part), nonempty(cols))
                    cleared += int(conn.execute(select(text_chars(cols)).where(where)).scalar())
                if cleared == 0:
                    continue
                for part in chunks(ids):
                    rows += int(
                        conn.execute(
                            select(func.count())
                            .select_from(t)
                            .where(t.c[key].in_(part), nonempty(cols))
                        ).scalar()
                    )
                    if not dry_run:
                        conn.execute(
                            update(t).where(t.c[key].in_(part)).values({c.name: "" for c in cols})
                        )
                chars += cleared
            if runs and not dry_run:
                snaps = table("snapshots")
                for part in chunks(runs):
                    conn.execute(
                        update(snaps).where(snaps.c.run_id.in_(part)).values(state="archived")
                    )
        return Archived(turns, rows, chars)
