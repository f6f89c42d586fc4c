"""Sending one origin's snapshot into the destination, inside the caller's transaction.

`OriginSync.run` reads every table of the source snapshot through its rule (`rules.RULES`):
state tables row by row against the hashes recorded last time, append tables from the
high-water mark on. Links are remapped through the id maps of runs, sessions and turns, which
grow as this sync inserts. The rows, the id maps and the marks are committed together: in the
caller's one transaction, or (`slices`, a SQLite centre) in slices of at most `SLICE` rows (or
`batch_size`) each, every slice with the maps and marks of its own rows, so a sync killed at
any point leaves the destination as its last committed slice left it, and the next sync sends
the rest. A row a slice commits before it is settled (a link to a row a later slice sends, a
run whose rows are sent again later) has its map saved `UNSETTLED` until it is, so it is sent
again.
"""

from __future__ import annotations

import time
from contextlib import ExitStack

from sqlalchemy import delete

from ..dialects import backend_for
from ..models.spend import RUN_SPEND_TABLES
from ..models.sync import IDS
from . import quarantine
from .finding import CentralIds
from .holding import Holding
from .late_links import LateLinks
from .origin_state import (
    CHUNK,
    PAGE_CHECK_EVERY,
    PAGES_MARK,
    STATE_MARK,
    Overtaken,
)
from .rewinding import Rewinding
from .rows import model_table, source_columns_of
from .rules import RULES, RUNS, SESSIONS, TURNS


class OriginSync(LateLinks, Rewinding, Holding):
    """One origin's sync: loads its id maps and marks, writes the difference, saves them."""

    check_growth = True
    """Whether the pages may be checked before rows that only grew the source are written:
    then when the origin's last check is `PAGE_CHECK_EVERY` old (`_pages_due`); a new origin
    and a source read again in full are checked whatever this says."""

    lenient: ExitStack
    """What reads the source leniently for the pass (closed at its end)."""

    def run(self) -> None:
        """Send everything that changed since the last sync of this origin (`_run`), the
        source read leniently (`Backend.tolerant`) when it holds a text whose
        bytes are not UTF-8 in a run this pass holds back."""
        with ExitStack() as self.lenient:
            self._run()

    def _run(self) -> None:
        """Send everything that changed since the last sync of this origin.

        The source's pages are checked (`check_pages`) before anything is written, when there
        is anything to write: a sync that finds nothing new reads only the tops of the append
        tables and the state tables, and spares the check's read of the whole file; one that
        finds little checks only when due (`_pages_due`)."""
        if self.adopt:
            self._adopt_all()
            return
        reason = None
        self.syncs = self._syncs() if self.slices is not None else 0
        if self.slices is not None:  # the origin is registered: the maps are read apart
            self.reader = self.slices.read()
            self._dst = None
            if self._syncs() != self.syncs:
                raise Overtaken
        if not self.fresh:
            self._load()
            reason = self._rewound()
            self._look_again_at_held()  # the last pass held runs back
        if self.unreadable or self.held_lenient:
            self.lenient.enter_context(backend_for(self.src).tolerant(self.src))
        self.whole_read = self.fresh or reason is not None
        self.tops = self._append_tops()
        self.streaming = self.fresh  # nothing central to compare with: read as sent
        if self.streaming:  # the centre maps nothing of a new origin but what this pass
            for tbl in self.ids:  # writes, and the pass's maps keep all of that
                self.ids[tbl] = CentralIds(_nothing_central)
        read = {
            rule.table: self._read_state(rule)
            for rule in RULES
            if rule.kind == "state" and rule.table in self.have and not self.streaming
        }
        state_changed = self.streaming or any(
            self.hwm_loaded.get(STATE_MARK + table) != total for table, (*_, total) in read.items()
        )
        grown = any(top > self.hwm.get(table, 0) for table, top in self.tops.items())
        work = self.fresh or reason is not None or state_changed or grown
        checked = self.fresh or reason is not None or (self.check_growth and self._pages_due())
        checked_at = None
        if work and checked and self.check_pages is not None:
            self.check_pages()
            checked_at = int(time.time())
        if work and not self.adopt:
            self._hold_values(read, whole=self.fresh or reason is not None)
        # an archive changes state rows too (turns, runs): only then are the append tables'
        # texts counted again
        self.scan_texts = state_changed
        if reason is not None:
            self._forget()
            self.reread = reason
            self.fresh = True
            self.maps = {}
            self.ids = {RUNS: {}, SESSIONS: {}, TURNS: {}}
            self.hwm, self.hwm_loaded, self.hwm_saved = {}, {}, {}
        if checked_at is not None:
            self.hwm[PAGES_MARK] = checked_at
        for tbl in self.ids:
            self.maps.setdefault(tbl, {})
        # one query for the id maps of every table that changed (a table without a mark was
        # never synced from this origin: it has no map to read)
        changed = [
            table
            for table, (_, _, total) in read.items()
            if table not in self.partial and self.hwm_loaded.get(STATE_MARK + table) != total
        ]
        if changed and not self.fresh:
            self._read_maps(IDS.c.tbl.in_(changed))
        totals = {table: total for table, (_, _, total) in read.items()}
        for rule in RULES:
            if rule.table not in self.have:
                continue
            if rule.kind == "state" and self.streaming:
                self._stream_state(rule)
            elif rule.kind == "state":
                self._sync_state(rule, *read.pop(rule.table))
            else:
                self._sync_append(rule)
        self._mark_held(totals)  # the next pass looks at the held runs again
        if not self.adopt:  # a copy's links are its own already
            self._apply_fixups(final=True)
        self._delete_gone_runs()
        if self.uncovered:
            self._uncover_shadowed()
        self._save(final=True)
        if self.released:  # sent whole by this pass: in its last transaction
            quarantine.release(self.dst, self.origin_id, self.released)

    def _adopt_all(self) -> None:
        """The id maps and marks a sync of the snapshot would leave, its rows being in the
        destination already under their own ids (a copy's, `adopt`): each state table
        streamed into its map a batch at a time (`_adopt_state`), each append table's marks
        read as aggregates (`_adopt_append`)."""
        self.whole_read = True
        self.tops = self._append_tops()
        for rule in RULES:
            if rule.table not in self.have:
                continue
            if rule.kind == "state":
                self._adopt_state(rule)
            else:
                self._adopt_append(
                    model_table(rule), source_columns_of(model_table(rule), self.have)
                )
        self._save(final=True)

    def _pages_due(self) -> bool:
        """Whether the source's pages are to be checked this pass: its origin's last check
        (`PAGES_MARK`, any pass's, `sync`'s or a follower's) is `PAGE_CHECK_EVERY` old, or
        was never made, or is dated ahead of this host's clock.

        The check (`PRAGMA quick_check`) reads the whole file, so a pass of one new run made
        with it costs the source's size. It is not what keeps damage out of the centre: a
        page a pass reads is checked by SQLite as it reads it, and a damaged one fails the
        read, and the pass with it. What the check adds is the news of damage in pages no
        pass reads yet, which can wait that long."""
        last = self.hwm_loaded.get(PAGES_MARK)
        return last is None or not 0 <= time.time() - last <= PAGE_CHECK_EVERY

    def _delete_gone_runs(self) -> None:
        """Delete centrally the runs deleted in the source, with their append rows and the
        centre's own spend rows of them (their state rows went with the tables' own
        deletions)."""
        if not self.gone_runs:
            return
        runs = model_table(RULES[0])
        changes = {int(c["s"]): c for c in self.gone_changes}
        gone = sorted(self.gone_runs.items(), key=lambda item: item[1])
        for start in range(0, len(gone), CHUNK):
            part = gone[start : start + CHUNK]
            dest = [d for _, d in part]
            for rule in RULES:
                if rule.kind != "append" or rule.table not in self.have:
                    continue
                table = model_table(rule)
                assert rule.run_column is not None
                done = self.dst.execute(delete(table).where(table.c[rule.run_column].in_(dest)))
                self.counts.deleted[rule.table] += max(done.rowcount, 0)
            for spend in RUN_SPEND_TABLES:  # after `provider_calls`, whose triggers bump them
                self.dst.execute(delete(spend).where(spend.c.run_id.in_(dest)))
            self.dst.execute(delete(runs).where(runs.c.id.in_(dest)))
            self.counts.deleted[RUNS] += len(dest)
            # a run's map says it is gone in the transaction that deletes it
            self.map_changed.extend(changes[s] for s, _ in part)
            self._slice_done(len(part))


def _nothing_central(keys: list[int]) -> list[tuple[int, int]]:
    """The central ids the centre holds of a new origin's `keys` before its first pass
    writes any: none."""
    return []
