"""Retention (0.58): how big a session and the store are, deleting and sweeping sessions,
archiving a session's words, compacting the file.

A session owns every run of every turn's tree (children included), and every row keyed to those
runs in `RUN_TABLES` — the same list upstream deletes from. A deletion or an archive is one
transaction: all of it or none of it, never an orphan in any table. Sizes count rows and the
characters of text columns (what deleting would free), not pages.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    Table,
    and_,
    bindparam,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.sql.sqltypes import LargeBinary, String

from .. import models as m
from ..errors import InvalidValueError
from ..formats import is_int
from ..records import Archived, Pruned, SessionSize, StoreSize
from ..records.runs import FINISHED_STATUSES
from .lease_rows import lease_row
from .marks import maintains, reads, writes
from .older import OlderStoreMixin

RUN_TABLES: tuple[tuple[str, str], ...] = (
    ("steps", "run_id"),
    ("policy_events", "run_id"),
    ("pending_approvals", "run_id"),
    ("agent_events", "run_id"),
    ("sandbox_events", "run_id"),
    ("checkpoint_events", "run_id"),
    ("spawns", "parent_run_id"),
    ("mcp_events", "run_id"),
    ("memory_recalls", "run_id"),
    ("memory_snapshots", "run_id"),
    ("context_events", "run_id"),
    ("run_outcomes", "run_id"),
    ("run_policies", "run_id"),
    ("ledger_observations", "run_id"),
    ("provider_calls", "run_id"),
    ("edits", "run_id"),
    ("todos", "run_id"),
    ("pending_questions", "run_id"),
    ("citations", "run_id"),
    ("server_tool_calls", "run_id"),
    ("process_handles", "run_id"),
    ("handle_output", "run_id"),
    ("snapshots", "run_id"),
    ("plans", "run_id"),
    ("agent_queue", "parent_run_id"),
    ("run_events", "run_id"),
    ("rewinds", "run_id"),
    ("gate_attempts", "run_id"),
    ("summaries", "run_id"),
    ("agent_messages", "to_run_id"),
    ("run_leases", "run_id"),
    ("step_turns", "run_id"),
    ("tool_attempts", "run_id"),
)
"""Every table keyed to a run, with its key: what a session's deletion removes (upstream's
list, in upstream's order; the mailbox by recipient, both ends being in one tree)."""
SNAPSHOTS = [name for name, _ in RUN_TABLES].index("snapshots")

_FACT_COLUMNS = frozenset(
    [
        "kind",
        "act",
        "state",
        "status",
        "outcome",
        "verdict",
        "source",
        "layer",
        "rule",
        "provider",
        "model",
        "finish_reason",
        "tool",
        "path",
        "at",
        "created_at",
        "started_at",
        "finished_at",
        "workspace",
        "turn_kind",
    ]
)
_FACT_IN_TABLE = frozenset(
    {
        ("runs", "file"),
        ("policy_events", "decision"),
        ("sessions", "root"),
        ("snapshots", "path"),
        ("edits", "path"),
        ("policy_events", "target"),
        ("ledger_observations", "target"),
        ("memory_recalls", "key"),
        ("memory_snapshots", "key"),
    }
)
COMPACT_SLICE_PAGES = 256
"""The most free pages a compact gives back per write transaction (1 MiB of 4 KiB pages)."""

COMPACT_SLICE_WORK = 4_000_000
"""Pages a compact slice may give back times the pages free when it begins. Giving back a
free page at the file's end makes SQLite search the free list for it, one entry a free page,
so a slice of a fixed number of pages costs more the more is free (on a store of a million
runs pruned by half, 256 pages took up to 0.4 s, a live writer waiting as long); within this
budget a slice is tens of milliseconds however much is free."""


def slice_pages_for(free: int, most: int) -> int:
    """The pages the next compact slice gives back when `free` pages are free: at most
    `most`, within `COMPACT_SLICE_WORK`, and at least one."""
    return max(1, min(most, COMPACT_SLICE_WORK // max(free, 1)))


STEP_ASIDE = 0.005
"""The least a maintenance command waits between two of its slices (seconds): longer than a
queued writer's retry (`sqlite_queue.wait_turn`: every 2 ms at most), so the writers waiting
get the next turn instead of the slice after."""


def step_aside(began: float) -> None:
    """Between two slices of a maintenance command (the last began at `began`, monotonic):
    leave the store to its writers for as long as that slice held it, and at least
    `STEP_ASIDE`, so the command holds the writers' turn at most half the time and every
    writer waiting, queued or on SQLite's busy handler, has its turn before the next slice."""
    time.sleep(max(STEP_ASIDE, time.monotonic() - began))


CHUNK = 500
"""Ids per `IN (…)` list, well under every backend's bound-parameter limit."""


def is_fact_column(table: str, column: str) -> bool:
    """Whether an archive keeps this column: what a row is, what was decided, where and when
    — never the words (a prompt, a reply, a goal, output)."""
    return column in _FACT_COLUMNS or (table, column) in _FACT_IN_TABLE


def table(name: str) -> Table:
    return m.Base.metadata.tables[name]


def text_columns(name: str) -> list[Any]:
    """A table's TEXT and BLOB columns, as upstream sizes them."""
    return [c for c in table(name).columns if isinstance(c.type, String | LargeBinary)]


def chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    for i in range(0, len(ids), CHUNK):
        yield list(ids[i : i + CHUNK])


def text_chars(columns: Sequence[Any]) -> Any:
    """`SUM(LENGTH(c))` over columns, 0 when empty."""
    total: Any = literal(0)
    for c in columns:
        total = total + func.coalesce(func.sum(func.length(c)), 0)
    return total


def nonempty(columns: Sequence[Any]) -> Any:
    return or_(*(func.coalesce(func.length(c), 0) > 0 for c in columns))


@cache
def delete_statement(name: str, key: str, *, returning: bool = False) -> Any:
    """`DELETE FROM name WHERE key IN (:ids)`, built once; `returning`, it returns every
    column of each row it deleted (what an archive receives)."""
    t = table(name)
    statement = delete(t).where(t.c[key].in_(bindparam("ids", expanding=True)))
    return statement.returning(*t.columns) if returning else statement


@cache
def tally_statement(scope: str) -> Any:
    """One SELECT counting the rows and text characters of every table a deletion touches,
    for the ids in the expanding parameter `ids`: the session tables (`scope` "sessions") or
    the runs and every run-keyed table ("runs"). Built once; a scalar subquery per table."""
    if scope == "sessions":
        parts = [("session_turns", "session_id"), ("sessions", "id")]
    else:
        parts = [("runs", "id"), *RUN_TABLES]
    ids: Any = bindparam("ids", expanding=True)
    columns = []
    for name, key in parts:
        t = table(name)
        columns.append(
            select(func.count()).select_from(t).where(t.c[key].in_(ids)).scalar_subquery()
        )
        cols = text_columns(name)
        chars = select(text_chars(cols)).where(t.c[key].in_(ids)) if cols else select(literal(0))
        columns.append(chars.scalar_subquery())
    return select(*columns)


def tally(conn: Any, scope: str, ids: Sequence[int]) -> list[tuple[int, int]]:
    """(rows, characters) per table of `scope` for these ids, summed over chunks of ids."""
    statement = tally_statement(scope)
    totals: list[tuple[int, int]] | None = None
    for part in chunks(ids):
        row = conn.execute(statement, {"ids": part}).one()
        pairs = [(int(row[i] or 0), int(row[i + 1] or 0)) for i in range(0, len(row), 2)]
        totals = (
            pairs
            if totals is None
            else [(a + c, b + d) for (a, b), (c, d) in zip(totals, pairs, strict=True)]
        )
    return totals or []


def lock_runs(conn: Any, ids: Sequence[int]) -> list[int]:
    """Lock the rows of these runs until the commit and return those that exist, ascending.

    PostgreSQL: `SELECT … FOR UPDATE`, in id order (two prunes never deadlock), which waits
    for a writer holding one of them (a status change, a lease being taken, a step's foreign
    key) and makes the next such writer wait for this transaction. SQLite: the transaction
    already holds the database's write lock (`BEGIN IMMEDIATE`), so the plain read is enough.
    """
    r = table("runs")
    found: list[int] = []
    for part in chunks(sorted(ids)):
        statement = select(r.c.id).where(r.c.id.in_(part)).order_by(r.c.id).with_for_update()
        found += [int(i) for i in conn.execute(statement).scalars()]
    return found


def live_runs(conn: Any, now_sql: str, ids: Sequence[int]) -> set[int]:
    """Which of these runs retention must keep, read now (under `lock_runs` for a deletion):
    not finished (running, paused, or a status upstream reads as running), holding an
    unlapsed lease (on the database's clock), or waiting for a person (an unresolved
    approval, an unanswered question, an undecided plan)."""
    r, leases = table("runs"), table("run_leases")
    approvals, questions, plans = (
        table("pending_approvals"),
        table("pending_questions"),
        table("plans"),
    )
    live: set[int] = set()
    for part in chunks(list(ids)):
        waiting = [
            select(r.c.id).where(r.c.id.in_(part), r.c.status.not_in(FINISHED_STATUSES)),
            select(approvals.c.run_id).where(
                approvals.c.run_id.in_(part), approvals.c.resolved.is_(None)
            ),
            select(questions.c.run_id).where(
                questions.c.run_id.in_(part), questions.c.resolved == 0
            ),
            select(plans.c.run_id).where(plans.c.run_id.in_(part), plans.c.resolved == 0),
        ]
        for statement in waiting:
            live.update(int(i) for i in conn.execute(statement).scalars())
        held = select(
            leases.c.run_id,
            leases.c.owner,
            leases.c.generation,
            leases.c.acquired_at,
            leases.c.renewed_at,
            leases.c.ttl_secs,
            literal_column(now_sql),
        ).where(leases.c.run_id.in_(part))
        for row in conn.execute(held):
            if not lease_row(int(row[0]), row[1:6], row[6]).expired:
                live.add(int(row[0]))
    return live


class SessionRetentionMixin(OlderStoreMixin):
    """Upstream's `sessions.rs`, second half, with `store_size` and `compact`."""

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
            work = [(name, key, runs) for name, key in RUN_TABLES] if runs else []
            if runs:
                work.append(("runs", "id", runs))
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

    @reads
    def store_size(self) -> StoreSize:
        """The store's footprint: bytes in use and free, sessions and runs, and bytes per table
        and index, largest first (SQLite pages through `dbstat`; PostgreSQL relation sizes)."""
        s, r = table("sessions"), table("runs")
        has_sessions = not self._lacks("sessions")
        with self._read() as conn:
            file_bytes, free_bytes, tables = self._backend.footprint(conn)
            sessions = 0
            if has_sessions:
                sessions = int(conn.execute(select(func.count()).select_from(s)).scalar())
            runs = int(conn.execute(select(func.count()).select_from(r)).scalar())
        tables.sort(key=lambda item: (-item[1], item[0]))
        return StoreSize(file_bytes, free_bytes, sessions, runs, tables)

    @maintains
    def compact(self, *, slice_pages: int = COMPACT_SLICE_PAGES) -> int:
        """Give the space deletions freed back. SQLite: a store in incremental auto-vacuum
        (every store harness_store makes) gives its free pages back at most `slice_pages` at
        a time (fewer while many are free: `COMPACT_SLICE_WORK`), each slice its own short
        write transaction in the writers' turn, stepping aside
        between slices (`step_aside`), so a live writer waits for a slice, not the file, and
        a compact stopped between slices has lost nothing (what it gave back stays given
        back); a store io-harness made is switched to that mode by one `VACUUM` that
        rewrites the whole file, writers waiting meanwhile, once. PostgreSQL: `VACUUM` marks
        dead rows' space reusable beside live writers (the files shrink only at their tail;
        `VACUUM FULL` would lock every table). Returns how many bytes the store shrank by.

        Outside any transaction only: inside a `transaction()` block it raises
        `TransactionOpenError` and does nothing."""
        if not is_int(slice_pages) or slice_pages < 1:
            raise InvalidValueError(f"slice_pages must be a positive number, not {slice_pages!r}")
        before = self.store_size().file_bytes
        with self._maintenance() as driver:
            sliced = self._backend.vacuums_in_slices(driver)
            if not sliced:
                self._backend.vacuum(driver)
        left: int | None = None
        pages = 1  # the first slice also says how many pages are free
        while sliced:
            began = time.monotonic()
            with self._maintenance() as driver:  # one slice, one turn
                now = self._backend.vacuum_slice(driver, pages)
            if now == 0 or (left is not None and now >= left):
                break  # all given back, or writers free pages as fast as it gives them back
            left = now
            pages = slice_pages_for(now, slice_pages)
            step_aside(began)
        after = self.store_size().file_bytes
        return max(before - after, 0)
