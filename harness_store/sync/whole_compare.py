"""A big state table compared whole with what an existing origin sent before, streamed.

A pass compares a table whole when its rows cannot be found in part (`finding`): the source
was pruned (its counts no longer agree with the id maps), runs are held back, the table has
no marks yet, or the source's history went back (a restored backup, sent again in full). The
table is then read in key order a batch at a time, never held: once to hash it (unchanged, it
costs no more), and when it changed, merged in key order against the id map, read the same
way a range at a time: first the keys alone, to delete the rows gone (before anything is
written, as a whole compare always did: a new or changed row may take a gone one's place),
then the rows, each batch's changed ones written before the next is read, then the new ones,
read again by their keys. Memory holds a batch and what changed, whatever the table's size.

A table that fits in one batch is compared in memory as it was read (`state_tables`)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from sqlalchemy import ColumnElement, delete, select, update

from ..models.sync import IDS, MARKS
from .finding import FINISHED, KEY_MARK, CentralIds
from .origin_state import HELD_MARK, ROUND_TRIP_ROWS, STATE_MARK, Entry, chunks
from .rows import ROWID, RowsDigest, digest, model_table, source_columns, source_select
from .rules import RULES, RUNS, SESSIONS, TURNS, Rule
from .state_tables import StateTables

ENTRY_RANGE = 5000
"""Id map entries read a statement while a table is merged with its map."""


class WholeCompare(StateTables):
    """Comparing a big state table whole, streamed (see the module)."""

    def _read_state(self, rule: Rule) -> tuple[list[str], list[Any], int]:
        """A state table's column names, rows (in key order) and the hash of them all; of a
        big table read in part (`finding`), the rows that may have changed and a hash that
        is the last one when none did; of a big table read whole, no rows: it is hashed a
        batch at a time and merged later (`_merge_state`)."""
        if self._partial_ok(rule):
            return self._read_part(rule)
        cursor, names = self._state_cursor(rule)
        key_at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
        status_at = names.index("status") if rule.table == RUNS and "status" in names else None
        total = RowsDigest()
        opened: set[int] = set()
        rows: list[Any] = []
        last: int | None = None
        last_batch: list[Any] | None = None
        while batch := cursor.fetchmany(self.batch_size):
            total.add(batch)
            last = int(batch[-1][key_at])
            if status_at is not None:
                opened.update(int(r[key_at]) for r in batch if r[status_at] not in FINISHED)
            if last_batch is None and len(batch) < self.batch_size:
                rows = batch  # the whole table in one batch: compared in memory
            else:
                rows = []
                self.streamed.add(rule.table)
            last_batch = batch
        if last is not None:
            self.pending[rule.table] = {KEY_MARK + rule.table: last}
        if status_at is not None:
            self.pending_open = opened
        if rule.table in self.streamed:
            self.partial.add(rule.table)  # its map is read a range at a time, never whole
        return names, rows, total.value()

    def _sync_state(self, rule: Rule, names: list[str], rows: list[Any], total: int) -> None:
        """A table compared in memory as before; a streamed one merged with its map, or sent
        as a new origin's is when the origin is sent again in full."""
        if rule.table not in self.streamed:
            super()._sync_state(rule, names, rows, total)
            return
        mark = STATE_MARK + rule.table
        if self.hwm_loaded.get(mark) == total:
            self.hwm[mark] = total
            self._state_marks(rule)
            return
        if self.fresh:  # read again in full: nothing central of it is left
            self._stream_from_here()
            self._stream_state(rule)
            return
        self._merge_state(rule, names, total)

    def _stream_from_here(self) -> None:
        """Stream the rest of a pass sending its origin again in full, as a new origin's is
        (`streaming`): the ids sent so far kept until their maps are written."""
        if self.streaming:
            return
        self.streaming = True
        for tbl, ids in list(self.ids.items()):
            if not isinstance(ids, CentralIds):
                central = CentralIds(partial(self._central_ids, tbl))
                for key, value in ids.items():
                    central[key] = value
                self.ids[tbl] = central

    def _merge_state(self, rule: Rule, names: list[str], total: int) -> None:
        """Compare `rule`'s source table with its id map, both in key order (the module): its
        rows gone deleted, then the changed ones written a batch at a time, then the new."""
        table = model_table(rule)
        key = self._key_column(rule, table)
        old = self.maps.setdefault(rule.table, {})
        gone = self._gone_entries(rule, key)
        if gone:
            self.old_changed = True  # rows sent before went: a prune, perhaps
        old.update(gone)
        if rule.table == RUNS:
            self._runs_gone(sorted(gone))
        else:
            if rule.table == "memory" and any(e[0] is not None for e in gone.values()):
                self.uncovered = True
            self._delete_rows(rule, table, list(gone.values()))
            for k in sorted(gone):
                self.map_gone.append({"t": rule.table, "s": k})
                del old[k]
            self.counts.deleted[rule.table] += len(gone)
        self._let_go(rule.table)
        del gone
        weight = ROUND_TRIP_ROWS if rule.table == "memory" else 1
        size = max(1, self.slice_rows // weight) if self.slices is not None else self.batch_size
        held = self._held_test(rule, names)
        key_at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
        cursor, _ = self._state_cursor(rule)
        new: list[int] = []
        skipped = False
        low: int | None = None
        while batch := cursor.fetchmany(self.batch_size):
            high = int(batch[-1][key_at])
            wanted = {int(r[key_at]) for r in batch}
            for entries in self._entry_ranges(rule, low, high):
                old.update((k, e) for k, e in entries if k in wanted)
            low = high
            changed: list[tuple[int, int, Any]] = []
            for row in batch:
                k = int(row[key_at])
                if held is not None and held(row):
                    skipped = True  # its run is held back: neither sent nor gone
                    continue
                entry = old.get(k)
                if entry is None:
                    new.append(k)
                elif entry[2] != (hashed := digest(row)):
                    changed.append((k, hashed, row))
            if changed:
                self.old_changed = True  # rows sent before changed: an archive, perhaps
                self._prefetch_links(rule, names, [r for _, _, r in changed])
            self._write_changed(rule, table, names, changed, old, size, weight)
            self._let_go(rule.table)
        statement = source_select(rule, source_columns(rule, self.have))
        for keys in chunks(new):  # in key order, as they were read
            rows = self._raw(statement.where(key.between(keys[0], keys[-1]), key.in_(keys)))
            found = [(int(r[key_at]), digest(r), r) for r in rows.fetchall()]
            self._prefetch_links(rule, names, [r for _, _, r in found])
            for start in range(0, len(found), size):
                items = [(k, h, r, False) for k, h, r in found[start : start + size]]
                self._insert_state(rule, table, names, items)
                self._slice_done(len(items) * weight)
            self._let_go(rule.table)
        # the whole table is sent (saved with the last slice), or compared again next time
        self.hwm[STATE_MARK + rule.table] = HELD_MARK if skipped else total
        self._state_marks(rule)

    def _gone_entries(self, rule: Rule, key: ColumnElement[Any]) -> dict[int, Entry]:
        """The id map entries of `rule`'s table whose row the source no longer holds (a run
        gone before, its entry kept without a hash, is not gone again): the source's keys
        and the map's merged in key order, a batch of each at a time."""
        table = model_table(rule)
        cursor = self._raw(select(key).select_from(table).order_by(key))
        gone: dict[int, Entry] = {}

        def take(low: int | None, high: int | None, present: set[int]) -> None:
            for part in self._entry_ranges(rule, low, high):
                for k, entry in part:
                    if k not in present and (entry[2] is not None or rule.table != RUNS):
                        gone[k] = entry

        low: int | None = None
        while batch := cursor.fetchmany(self.batch_size):
            high = int(batch[-1][0])
            take(low, high, {int(k) for (k,) in batch})
            low = high
        take(low, None, set())  # every entry above the source's last key
        return gone

    def _entry_ranges(
        self, rule: Rule, low: int | None, high: int | None
    ) -> Iterator[list[tuple[int, Entry]]]:
        """The id map entries of `rule`'s table above `low` up to `high` (None: no bound), in
        key order, `ENTRY_RANGE` a statement (on the map's key), as the driver gives them."""
        base = select(IDS.c.src_id, IDS.c.dest_id, IDS.c.dest_sub, IDS.c.hash).where(
            IDS.c.origin_id == self.origin_id, IDS.c.tbl == rule.table
        )
        if high is not None:
            base = base.where(IDS.c.src_id <= high)
        while True:
            statement = base if low is None else base.where(IDS.c.src_id > low)
            rows = self.backend.driver_rows(
                self.central, statement.order_by(IDS.c.src_id).limit(ENTRY_RANGE)
            )
            part = [(int(s), [d, d2, h]) for s, d, d2, h in rows.fetchall()]
            if part:
                yield part
            if len(part) < ENTRY_RANGE:
                return
            low = part[-1][0]

    def _let_go(self, tbl: str) -> None:
        """Drop the entries of `tbl`'s rows compared so far: written (or to be, with the
        pass's changes), they are read again from the centre as asked; an unsettled row's is
        kept, for the save that settles it."""
        entries = self.maps.get(tbl, {})
        for k in [
            k
            for k in entries
            if not self._unsettled((tbl, k)) and (tbl, k) not in self.flushed_unsettled
        ]:
            del entries[k]

    def _forget(self) -> None:
        """Delete every central row of this origin, its id maps and marks: it is sent again
        in full, as a new origin's would be (its runs get new central ids). Each table's rows
        are found by the id maps in the centre (`IN (SELECT …)`), never read into the pass."""

        def mapped(tbl: str) -> Any:
            return select(IDS.c.dest_id).where(
                IDS.c.origin_id == self.origin_id, IDS.c.tbl == tbl, IDS.c.dest_id.is_not(None)
            )

        runs = mapped(RUNS)
        for rule in reversed(RULES):
            if rule.referenced:
                continue
            table = model_table(rule)
            if rule.kind == "append" or rule.key in ("run", "rowid"):
                assert rule.run_column is not None
                self.dst.execute(delete(table).where(table.c[rule.run_column].in_(runs)))
            else:
                done = self.dst.execute(delete(table).where(table.c.id.in_(mapped(rule.table))))
                if rule.table == "memory" and done.rowcount:
                    self.uncovered = True
        run_table, sessions, turns = (model_table(r) for r in RULES[:3])
        self.dst.execute(
            update(sessions).where(sessions.c.id.in_(mapped(SESSIONS))).values(head_turn_id=None)
        )
        self.dst.execute(delete(turns).where(turns.c.id.in_(mapped(TURNS))))
        self.dst.execute(delete(sessions).where(sessions.c.id.in_(mapped(SESSIONS))))
        self.dst.execute(
            update(run_table).where(run_table.c.id.in_(runs)).values(parent_run_id=None)
        )
        self.dst.execute(delete(run_table).where(run_table.c.id.in_(runs)))
        self.dst.execute(delete(IDS).where(IDS.c.origin_id == self.origin_id))
        self.dst.execute(delete(MARKS).where(MARKS.c.origin_id == self.origin_id))
