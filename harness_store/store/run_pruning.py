"""Retention for runs (beyond upstream): `prune_runs` deletes whole run trees that finished
before a date, in batches, each batch decided again and deleted in one transaction with its
runs locked, optionally copying exactly the rows its deletions return into an archive store,
committed before the batch is.

A tree goes or stays whole: a root run goes with every descendant only when every run of the
tree qualifies. A run in use is never pruned, whatever its date: running or paused, leased
(unlapsed), waiting for a person, or answering a session's turn (sessions go with their
session, by `sweep_sessions`). With each run go its rows in every run-keyed table
(`RUN_TABLES`) and harness_store's per-run spend rows; the per-day spend counters are moved by
the deletion itself (their triggers), so every kept spend answer stays exact.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    delete,
    func,
    select,
)

from ..errors import DiskFullError, InvalidValueError
from ..formats import is_int
from ..models.spend import RUN_SPEND_TABLES
from ..records import Pruned
from ..records.runs import FINISHED_STATUSES
from ..schema.preflight import is_disk_full
from ..targets import where
from .cutoff import Cutoff
from .marks import writes
from .prune_archive import PruneArchiveMixin, archiving_delete, exact_row, remove_store_file
from .release_tables import OlderStoreMixin
from .retention_rows import (
    RUN_TABLES,
    SNAPSHOTS,
    chunks,
    delete_statement,
    live_runs,
    lock_runs,
    table,
    tables_with_rows,
    tally,
)
from .store_space import Pace, step_aside

PRUNABLE_STATUSES = frozenset(FINISHED_STATUSES)
"""The statuses `prune_runs` may delete: those of a finished run (any other can still resume)."""

BATCH_ROWS = 20_000
"""About how many step and checkpoint rows one batch deletes: a writer waits at most that long."""

BATCH_RUNS = 100
"""At most how many runs one batch holds, whatever their rows: each run costs a lookup in every
run-keyed table to lock, decide, count and delete (some 0.25 ms of CPU on SQLite, more on a
store whose pages are not all cached), so a batch of many small runs would hold the writers'
turn as long as one of many rows; 100 runs are about `SLICE_SECONDS` on an idle machine."""

LEAST_ROWS = 1_000
LEAST_RUNS = 25
"""The least `Pace` shrinks a batch to (while `batch_rows` and `BATCH_RUNS` ask for more): below
that a batch's fixed cost (a few dozen statements) is most of its time."""

FORECAST_RUNS = 5_000
"""Runs read a page at a time when a prune decides what goes: what it holds meanwhile is the
trees that go and one page, not the whole `runs` table."""

Progress = Callable[[int, int], None]
Forest = dict[int, list[int]]
"""Each run's children."""
Info = dict[int, tuple[str | None, str | None]]
"""Each run's status and start stamp."""


@dataclass
class Tree:
    """A root run and every run under it, ascending, with their steps (to size batches)."""

    root: int
    runs: list[int]
    steps: int = 0


def check_statuses(statuses: object) -> frozenset[str]:
    if isinstance(statuses, str) or not isinstance(statuses, Sequence | frozenset | set):
        raise InvalidValueError(f"statuses must be a sequence of statuses, not {statuses!r}")
    chosen = frozenset(str(s.value if hasattr(s, "value") else s) for s in statuses)
    wrong = sorted(chosen - PRUNABLE_STATUSES)
    if wrong or not chosen:
        raise InvalidValueError(
            f"only completed and failed runs can be pruned (a running or paused run can still "
            f"resume), got {sorted(chosen) or 'none'}"
        )
    return chosen


def batches(
    trees: Sequence[Tree], rows: int, runs: int = BATCH_RUNS, pace: Pace | None = None
) -> Iterator[list[Tree]]:
    """Whole trees, a batch holding about `rows` step rows and at most `runs` runs (a bigger
    tree is a batch alone), both scaled by `pace` (its share when each batch begins) so a
    batch holds the writers' turn about `SLICE_SECONDS` whatever the store and the load."""
    i = 0
    while i < len(trees):
        most_rows = rows if pace is None else pace.scaled(rows, LEAST_ROWS)
        most_runs = runs if pace is None else pace.scaled(runs, LEAST_RUNS)
        batch = [trees[i]]  # at least one tree, however big
        size, count = weight(trees[i]), len(trees[i].runs)
        i += 1
        while i < len(trees):
            tree = trees[i]
            if size + weight(tree) > most_rows or count + len(tree.runs) > most_runs:
                break
            batch.append(tree)
            size += weight(tree)
            count += len(tree.runs)
            i += 1
        yield batch


def weight(tree: Tree) -> int:
    """What a tree weighs against `batch_rows`: its step and checkpoint rows and its runs."""
    return 2 * tree.steps + len(tree.runs)


def share(batch: Sequence[Tree], rows: int, runs: int = BATCH_RUNS) -> float:
    """What share of a full batch (`rows`, `runs`) this one is: the fuller of the two."""
    size = sum(weight(t) for t in batch)
    return max(size / rows, sum(len(t.runs) for t in batch) / runs)


def members(root: int, children: Forest) -> list[int]:
    """The runs of the tree under `root` (itself included), each once."""
    found, todo, seen = [], [root], {root}
    while todo:
        run = todo.pop()
        found.append(run)
        for child in children.get(run, ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return found


def root_pages(
    conn: Any,
    fetch: Callable[[Any, Any], list[Any]],
    *,
    newest_first: bool = False,
    below: int | None = None,
) -> Iterator[list[tuple[int, str | None, str | None]]]:
    """The root runs (those under `below`) as (id, status, started_at), FORECAST_RUNS runs
    read at a time in id order (oldest first, or newest first), by the primary key, as plain
    rows (`fetch`, the Store's `_fetch`)."""
    r = table("runs")
    last: int | None = None
    while True:
        statement = select(r.c.id, r.c.parent_run_id, r.c.status, r.c.started_at)
        if below is not None:
            statement = statement.where(r.c.id < below)
        if last is not None:
            statement = statement.where(r.c.id < last if newest_first else r.c.id > last)
        order = r.c.id.desc() if newest_first else r.c.id
        rows = fetch(conn, statement.order_by(order).limit(FORECAST_RUNS))
        if not rows:
            return
        roots = [(int(run), status, started) for run, parent, status, started in rows
                 if parent is None]  # fmt: skip
        if roots:
            yield roots
        last = int(rows[-1][0])


class RunPruningMixin(PruneArchiveMixin, OlderStoreMixin):
    """`prune_runs`: retention for every run, not only a session's."""

    @writes
    def prune_runs(
        self,
        *,
        before: str | datetime,
        statuses: Sequence[str] = FINISHED_STATUSES,
        keep_last: int | None = None,
        dry_run: bool = False,
        archive: str | os.PathLike[str] | None = None,
        batch_rows: int = BATCH_ROWS,
        progress: Progress | None = None,
    ) -> Pruned:
        """Delete every run tree started before `before` (a date, a stamp or a `datetime`,
        compared as an instant: see `harness_store.store.cutoff`) whose runs all have one of
        `statuses` and none is in use, with every row of theirs; the `keep_last` newest trees
        of those statuses stay whatever their dates. Say what went: runs, rows (and per
        table, `tables`), characters of text, the pruned `run_ids`, and in `refused` the roots
        kept because a run of theirs is in use.

        Batches of whole trees (about `batch_rows` rows each; after a batch over twice
        `SLICE_SECONDS`, as many as fit it) are each decided again and deleted in one
        transaction with their runs locked, so a live writer waits at most one batch and a
        run resumed meanwhile is kept. `archive` (a SQLite file, created at head if absent)
        receives exactly the rows each batch's deletions return (a row written
        meanwhile is archived, or kept in the source), committed before the batch is: a
        crash leaves every run in the source, or in the archive and not in the source.
        `dry_run=True` says what would go and writes nothing. `progress(done, total)` is
        called with runs after each batch.
        """
        cutoff = Cutoff.parse(before)
        chosen = check_statuses(statuses)
        if keep_last is not None and (not is_int(keep_last) or keep_last < 0):
            raise InvalidValueError(f"keep_last must be a number of trees ≥ 0, not {keep_last!r}")
        if not is_int(batch_rows) or batch_rows < 1:
            raise InvalidValueError(f"batch_rows must be a positive number, not {batch_rows!r}")
        target = None if archive is None else self._archive_path(archive)
        self._refuse_unless_current()
        with self._read() as conn:
            trees, refused = self._forecast(conn, cutoff, chosen, keep_last)
            if dry_run:
                return self._pruned(conn, [r for t in trees for r in t.runs], refused)
            if trees:  # the first batch's counting statements compiled outside its turn
                present = tables_with_rows(conn, self._run_owned_tables())
                self._pruned(conn, trees[0].runs, [], present)
        total = sum(len(t.runs) for t in trees)
        done: list[Pruned] = []
        kept = list(refused)
        count = 0
        new_archive = target is not None and bool(trees) and not target.exists()
        archive_store: Any = None
        filled: list[bool] = []  # the archive's disk filled while a batch was copied into it

        def receive(taken: dict[str, list[dict[str, Any]]]) -> None:
            try:
                archive_store._receive(taken)
            except Exception as exc:
                filled.append(is_disk_full(exc))
                raise

        try:
            try:
                archive_store = None if target is None or not trees else self._open_archive(target)
                if archive_store is not None:
                    with self._read() as conn:
                        archive_store._admit(conn, [run for t in trees for run in t.runs])
                began: float | None = None
                pace = Pace()
                for batch in batches(trees, batch_rows, pace=pace):
                    if began is not None:
                        step_aside(began)  # the writers' turn, as long as the batch held it
                    began = time.monotonic()
                    into = None if archive_store is None else receive
                    pruned = self._prune_batch(batch, cutoff, chosen, into)
                    pace.took(time.monotonic() - began, share(batch, batch_rows))
                    done.append(pruned)
                    kept += pruned.refused
                    count += sum(len(t.runs) for t in batch)
                    if progress is not None:
                        progress(count, total)
            finally:
                if archive_store is not None:
                    archive_store.close()
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            gone = sum(p.runs for p in done)
            if new_archive and not gone and target is not None:
                remove_store_file(target)
            # The archive's disk when opening it or copying a batch into it failed.
            in_archive = archive_store is None or any(filled)
            full = target if target is not None and in_archive else None
            raise DiskFullError(self._out_of_space(full, new_archive, gone)) from None
        tables: dict[str, int] = {}
        for p in done:
            for name, n in p.tables.items():
                tables[name] = tables.get(name, 0) + n
        return Pruned(
            runs=sum(p.runs for p in done),
            rows=sum(p.rows for p in done),
            bytes=sum(p.bytes for p in done),
            restore_points=sum(p.restore_points for p in done),
            refused=sorted(set(kept)),
            tables=tables,
            run_ids=sorted(r for p in done for r in p.run_ids),
        )

    def _refuse_unless_current(self) -> None:
        """A store opened read-only without its upgrade (an older release's) lacks tables or
        columns a prune counts and deletes in: `UpgradeRequiredError`, naming the upgrade."""
        for name in ["runs", "session_turns", *(name for name, _ in RUN_TABLES)]:
            if self._lacks(name, *(c.name for c in table(name).columns)):
                raise self._refuse_older("every table and column retention reads")

    # --- deciding -------------------------------------------------------------------------

    def _forecast(
        self, conn: Any, cutoff: Cutoff, chosen: frozenset[str], keep_last: int | None
    ) -> tuple[list[Tree], list[int]]:
        """The trees to prune (ascending by root, their steps counted) and the roots kept
        because in use, decided a page of roots at a time: what is held meanwhile is the
        trees that go, never the whole `runs` table. With `keep_last`, only trees under the
        `keep_last`-th newest tree of those statuses are candidates."""
        below = None
        if keep_last:
            below = self._newest_kept(conn, chosen, keep_last)
            if below is None:  # fewer trees of those statuses than are kept
                return [], []
        trees: list[Tree] = []
        refused: list[int] = []
        for page in root_pages(conn, self._fetch, below=below):
            # A tree goes only if its root does: only those roots' trees are read.
            old = [run for run, status, started in page
                   if status in chosen and cutoff.is_old(started)]  # fmt: skip
            found, busy = self._prunable_trees(conn, cutoff, chosen, old)
            self._count_steps(conn, found)
            trees += found
            refused += busy
        return trees, refused

    def _newest_kept(self, conn: Any, chosen: frozenset[str], keep_last: int) -> int | None:
        """The root of the `keep_last`-th newest tree whose runs all have one of `chosen`
        (None when there are fewer), read newest first a page of roots at a time."""
        seen = 0
        for page in root_pages(conn, self._fetch, newest_first=True):
            tops, children, info = self._forest(
                conn, [run for run, status, _ in page if status in chosen]
            )
            for root in sorted(tops, reverse=True):
                if all(info[run][0] in chosen for run in members(root, children)):
                    seen += 1
                    if seen == keep_last:
                        return root
        return None

    def _prunable_trees(
        self, conn: Any, cutoff: Cutoff, chosen: frozenset[str], roots: Sequence[int]
    ) -> tuple[list[Tree], list[int]]:
        """Of the trees of `roots`, those to prune now (ascending by root) and the roots kept
        because in use: read from the roots down by index, so deciding reads the trees' own
        rows, never the whole `runs` table."""
        tops, children, info = self._forest(conn, roots)
        trees: list[Tree] = []
        for root in tops:
            tree = members(root, children)
            if all(info[run][0] in chosen for run in tree):
                trees.append(Tree(root, sorted(tree)))
        trees = [t for t in trees if all(cutoff.is_old(info[run][1]) for run in t.runs)]
        every = [run for t in trees for run in t.runs]
        busy = live_runs(conn, self._backend.now(), every) | self._session_runs_among(conn, every)
        refused = [t.root for t in trees if busy.intersection(t.runs)]
        trees = [t for t in trees if not busy.intersection(t.runs)]
        return trees, refused

    @staticmethod
    def _forest(conn: Any, roots: Sequence[int]) -> tuple[list[int], Forest, Info]:
        """Of these roots' trees: the roots still roots (ascending), each run's children and
        each run's (status, started_at) — the roots, then each level's children through the
        `parent_run_id` index, so the rows read are the trees' own."""
        r = table("runs")
        columns = (r.c.id, r.c.parent_run_id, r.c.status, r.c.started_at)
        children: Forest = {}
        info: Info = {}
        tops: list[int] = []
        for part in chunks(sorted(set(roots))):
            for run, parent, status, started in conn.execute(
                select(*columns).where(r.c.id.in_(part))
            ):
                info[int(run)] = (status, started)
                if parent is None:
                    tops.append(int(run))
        level = list(tops)
        while level:
            below: list[int] = []
            for part in chunks(level):
                statement = select(*columns).where(r.c.parent_run_id.in_(part))
                for run, parent, status, started in conn.execute(statement):
                    children.setdefault(int(parent), []).append(int(run))
                    if int(run) not in info:  # a cycle of parents is walked once
                        info[int(run)] = (status, started)
                        below.append(int(run))
            level = below
        return sorted(tops), children, info

    @staticmethod
    def _session_runs_among(conn: Any, ids: Sequence[int]) -> set[int]:
        turns = table("session_turns")
        found: set[int] = set()
        for part in chunks(list(ids)):
            statement = select(turns.c.run_id).where(turns.c.run_id.in_(part))
            found.update(int(i) for i in conn.execute(statement).scalars())
        return found

    @staticmethod
    def _count_steps(conn: Any, trees: Sequence[Tree]) -> None:
        s = table("steps")
        owner = {run: t for t in trees for run in t.runs}
        for part in chunks(list(owner)):
            statement = (
                select(s.c.run_id, func.count()).where(s.c.run_id.in_(part)).group_by(s.c.run_id)
            )
            for run, n in conn.execute(statement):
                owner[int(run)].steps += int(n)

    # --- counting and deleting --------------------------------------------------------------

    def _pruned(
        self, conn: Any, runs: list[int], refused: list[int], among: frozenset[str] | None = None
    ) -> Pruned:
        """What deleting these runs removes, counted in `conn`'s transaction (reading only the
        tables `among`, when given: those holding any row)."""
        if not runs:
            return Pruned(refused=refused)
        counted = tally(conn, "runs", runs, among)
        names = ["runs", *(name for name, _ in RUN_TABLES)]
        tables = {name: n for name, (n, _) in zip(names, counted, strict=True) if n}
        for spend in RUN_SPEND_TABLES:
            if among is not None and spend.name not in among:
                continue
            n = self._count_keyed(conn, spend, runs)
            if n:
                tables[spend.name] = n
        return Pruned(
            runs=len(runs),
            rows=sum(tables.values()),
            bytes=sum(c for _, c in counted),
            restore_points=counted[1 + SNAPSHOTS][0],
            refused=refused,
            tables=tables,
            run_ids=sorted(runs),
        )

    def _run_owned_tables(self) -> list[str]:
        """The runs, every run-keyed table and the spend tables this store keys by run."""
        spend = [t.name for t in RUN_SPEND_TABLES if self._has_columns(t.name, "run_id")]
        return ["runs", *(name for name, _ in RUN_TABLES), *spend]

    def _count_keyed(self, conn: Any, spend: Any, runs: Sequence[int]) -> int:
        if not self._has_columns(spend.name, "run_id"):
            return 0
        total = 0
        for part in chunks(list(runs)):
            statement = select(func.count()).select_from(spend).where(spend.c.run_id.in_(part))
            total += int(conn.execute(statement).scalar() or 0)
        return total

    def _prune_batch(
        self,
        batch: list[Tree],
        cutoff: Cutoff,
        chosen: frozenset[str],
        archive: Callable[[dict[str, list[dict[str, Any]]]], None] | None,
    ) -> Pruned:
        """One transaction: lock the batch's runs, decide again, delete, and copy what the
        deletions returned to the archive (its own transaction, committed first)."""
        with self._write() as conn:
            lock_runs(conn, [run for t in batch for run in t.runs])
            trees, refused = self._prunable_trees(conn, cutoff, chosen, [t.root for t in batch])
            # A tree that grew a run since the forecast is locked again whole; its new runs
            # were started after the lock's first read, so they are decided on now.
            lock_runs(conn, [run for t in trees for run in t.runs])
            runs = [run for t in trees for run in t.runs]
            # A table without rows is neither counted nor deleted from: with most of the
            # run-keyed tables empty in many stores, that is most of a small batch's statements.
            present = tables_with_rows(conn, self._run_owned_tables())
            pruned = self._pruned(conn, runs, refused, present)
            if not runs:
                return pruned
            # With an archive, each DELETE returns the rows it removed and the archive receives
            # exactly those: a row written meanwhile is deleted and archived, or (committed
            # after the statement began) left in the store, never deleted unread.
            taken: dict[str, list[dict[str, Any]]] = {}
            for name, key in [*RUN_TABLES, ("runs", "id")]:
                if name == "runs":  # after `provider_calls`, whose delete triggers bump these
                    for kept in RUN_SPEND_TABLES:
                        if kept.name in present:
                            for part in chunks(runs):
                                conn.execute(delete(kept).where(kept.c.run_id.in_(part)))
                rows = taken.setdefault(name, [])
                if name not in present:
                    continue
                statement = (
                    delete_statement(name, key)
                    if archive is None
                    else archiving_delete(name, key, conn.dialect.name)
                )
                for part in chunks(runs):
                    result = conn.execute(statement, {"ids": part})
                    if archive is not None:
                        rows += [exact_row(row, table(name), conn.dialect.name) for row in result]
            if archive is not None:
                archive(taken)
        return pruned

    def _out_of_space(self, archive: Path | None, new_archive: bool, gone: int) -> str:
        """What a person reads when the disk under `archive` (None: under the store) filled
        during a prune, after `gone` runs were pruned in batches committed before."""
        if gone:
            what = f"{gone:,} runs were pruned (and archived) before; the others are still there"
        elif archive is not None:
            left = "the new archive was removed" if new_archive else "the archive is as it was"
            what = f"nothing was pruned: every run is still in the store, and {left}"
        else:
            what = "nothing was pruned: every run is still in the store"
        full = str(archive) if archive is not None else where(self.url)
        return f"{full}: the disk is full; {what}. Free some space and run the prune again"
