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
from functools import partial
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, insert, select, update

from ..dialects import backend_for
from ..errors import UnsendableValueError
from ..models.sync import IDS, MARKS
from ..stamps import Stamp
from . import quarantine
from .append_tables import AppendTables
from .finding import CentralIds, known
from .origin_state import (
    ANCHOR_MARK,
    CHUNK,
    HELD_MARK,
    PAGE_CHECK_EVERY,
    PAGES_MARK,
    STATE_MARK,
    UNSETTLED,
    Carried,
    Overtaken,
    anchor_columns,
)
from .report import HeldRun
from .rows import digest, model_table, source_columns_of
from .rules import RULES, RUNS, SESSIONS, TURNS, Rule
from .whole_compare import WholeCompare

MAP_COLUMNS = ("origin_id", "tbl", "src_id", "dest_id", "dest_sub", "hash")
"""An id map's columns, its key first (`IDS`)."""

_KEY_COLUMN = {"run": "run_id", "id": "id"}
"""The column that finds a central row of a table keyed by its run or its id."""


class OriginSync(WholeCompare, AppendTables):
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
        carried = self.carry.take() if self.carry is not None else None
        sliced = self.slices is not None
        self.syncs = self._syncs() if self.carry is not None or sliced else 0
        if self.slices is not None:  # the origin is registered: the maps are read apart
            self.reader = self.slices.read()
            self._dst = None
            if self._syncs() != self.syncs:
                raise Overtaken
        if not self.fresh:
            self._load(carried)
            reason = self._rewound()
            if not self.adopt and self.hwm_loaded.get(STATE_MARK + RUNS) == HELD_MARK:
                self._look_at_held_texts()  # the last pass held runs back
        if self.unreadable:
            self.lenient.enter_context(backend_for(self.src).tolerant(self.src))
        self.whole_read = self.fresh or reason is not None
        self.tops = self._append_tops()
        self.streaming = self.fresh  # nothing central to compare with: read as sent
        if self.streaming:
            for tbl in self.ids:
                self.ids[tbl] = CentralIds(partial(self._central_ids, tbl))
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
        # never synced from this origin: it has no map to read), unless they were carried
        changed = [
            table
            for table, (_, _, total) in read.items()
            if table not in self.whole
            and table not in self.partial
            and self.hwm_loaded.get(STATE_MARK + table) != total
        ]
        if self.fresh:
            self.whole = {rule.table for rule in RULES}  # nothing central: every map is whole
        elif changed:
            self._read_maps(IDS.c.tbl.in_(changed))
            self.whole.update(changed)
        for rule in RULES:
            if rule.table not in self.have:
                continue
            if rule.kind == "state" and self.streaming:
                self._stream_state(rule)
            elif rule.kind == "state":
                self._sync_state(rule, *read.pop(rule.table))
            else:
                self._sync_append(rule)
        if self.held:  # the next pass looks at the held runs again, whatever changed
            self.hwm[STATE_MARK + RUNS] = HELD_MARK
        if not self.adopt:  # a copy's links are its own already
            self._apply_fixups(final=True)
        self._delete_gone_runs()
        if self.uncovered:
            self._uncover_shadowed()
        self._save(final=True)
        if self.released:  # sent whole by this pass: in its last transaction
            quarantine.release(self.dst, self.origin_id, self.released)
        if self.carry is not None:
            self.carry.pending = self._carried()

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

    def _look_at_held_texts(self) -> None:
        """Note the texts whose bytes are not UTF-8 in the runs held back before (their rows
        only: few), so that such a run stays held without a read failing on it first."""
        before = self.held_before = quarantine.load(self.central, self.origin_id)
        if before:
            for table, (run, row, column, said) in quarantine.not_utf8(self.src, self.have, before):
                if run is not None:
                    self.unreadable.setdefault(run, (table, row, column, said))

    def _hold_values(self, read: dict[str, tuple[Any, Any, int]], *, whole: bool) -> None:
        """Find, before anything is written, every value among the rows this pass sends that
        the destination cannot hold as it is (`transfer.values.refusals`, the check copy
        makes): in the rows of every state table that changed, or all of them when the
        origin is sent `whole`, and the rows of every append table above its mark. The run
        of such a row is held back (`quarantine`), with what waits for it; a value in no
        run's row refuses the source (`UnsendableValueError`). Runs held back before are
        looked at again: one whose rows the centre can now hold is released, sent whole by
        this pass."""
        found: dict[int, tuple[str, str | None, str | None, str]] = {}
        for rule in RULES:
            if rule.table not in self.have:
                continue
            above: int | None = None
            runs = None
            if rule.kind == "state":
                if (
                    not whole
                    and self.hwm_loaded.get(STATE_MARK + rule.table) == read[rule.table][2]
                ):
                    continue
                runs = self.suspects.get(rule.table) if rule.table in self.partial else None
            else:
                above = 0 if whole else self.hwm.get(rule.table, 0)
                if self.tops.get(rule.table, 0) <= above:
                    continue
            for run, row, column, said in quarantine.find(
                self.src, self.have, self.backend, rule, above=above, runs=runs
            ):
                if run is None:
                    raise UnsendableValueError(f"{rule.table}.{column} of the row {row} {said}")
                found.setdefault(run, (rule.table, row, column, said))
        for run, entry in self.unreadable.items():  # texts a read of the source failed on
            found.setdefault(run, entry)
        before = self.held_before
        if before is None:
            before = {} if self.fresh else quarantine.load(self.central, self.origin_id)
        if before:
            for rule, _ in quarantine.run_rules(self.have):
                for run, row, column, said in quarantine.find(
                    self.src, self.have, self.backend, rule, runs=before
                ):
                    if run is not None:
                        found.setdefault(run, (rule.table, row, column, said))
        family = (
            quarantine.waiting(
                self.src,
                self.have,
                {r: f[3] for r, f in found.items()},
                set() if whole else known(self.ids[RUNS]),
            )
            if found
            else {}
        )
        held = [
            HeldRun(run, *found[run], new=run not in before)
            if run in found
            else HeldRun(run, RUNS, None, None, family[run], new=run not in before)
            for run in sorted(family)
        ]
        self.held = set(family)
        self.held_sessions = quarantine.held_sessions(self.src, self.have, self.held)
        self.released = sorted(set(before) - self.held)
        self.reload_runs.update(self.released)
        self.quarantined = held
        if held:
            quarantine.save(self.src, self.dst, self.have, self.origin_id, held, Stamp.now().text)

    def _carried(self) -> Carried:
        """What this pass knew for the next one: no id map (a pass reads the entries it
        needs from the centre, whatever the source's size, and holds no more)."""
        return Carried(self.origin_id, self.syncs, {})

    def _rewound(self) -> str | None:
        """Why the source's history went back since the last sync (a backup restored over it,
        in place or by rename), or None: an append table's id sequence below what was sent,
        or the row at its high-water mark not the one sent under that id."""
        marked = [
            model_table(r)
            for r in RULES
            if r.kind == "append" and r.table in self.have and self.hwm.get(r.table, 0) > 0
        ]
        if not marked:
            return None
        has_sequence = self.src.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'"
        ).first()
        sequences = (
            {
                str(n): int(v)
                for n, v in self.src.exec_driver_sql("SELECT name, seq FROM sqlite_sequence")
            }
            if has_sequence
            else {}
        )
        for table in marked:
            hwm = self.hwm[table.name]
            sequence = sequences.get(table.name, 0)
            if sequence < hwm:
                return f"{table.name} ids restart at {sequence}, below the {hwm} already synced"
            kept = self.hwm.get(ANCHOR_MARK + table.name)
            if kept is None:
                continue
            columns = anchor_columns(source_columns_of(table, self.have))
            row = self._raw(select(*columns).where(table.c.id == hwm)).fetchone()
            if row is not None and digest(tuple(row)) != kept:
                return f"row {hwm} of {table.name} is not the row synced under that id"
        return None

    def _uncover_shadowed(self) -> None:
        """Let other origins' memory entries a deleted one shadowed come back: their id maps
        forget the hash and their memory mark goes, so their next sync sends them again
        (unless another entry still holds the key and is newer)."""
        shadowed = and_(
            IDS.c.tbl == "memory", IDS.c.dest_id.is_(None), IDS.c.origin_id != self.origin_id
        )
        others = [
            int(o)
            for o in self.dst.execute(select(IDS.c.origin_id).where(shadowed).distinct()).scalars()
        ]
        if not others:
            self.uncovered = False
            return
        self.dst.execute(update(IDS).where(shadowed).values(hash=None))
        self.dst.execute(
            delete(MARKS).where(MARKS.c.origin_id.in_(others), MARKS.c.tbl == STATE_MARK + "memory")
        )

    def _load(self, carried: Carried | None = None) -> None:
        """The marks, and the central ids of the referenced tables as links ask for them
        (`finding.CentralIds`); a table's id map is read only when its rows changed, and
        of a table read in part only the entries of its rows read."""
        for tbl in self.ids:
            self.ids[tbl] = CentralIds(partial(self._central_ids, tbl))
        self.whole = set()
        marks = self.central.execute(
            select(MARKS.c.tbl, MARKS.c.hwm).where(MARKS.c.origin_id == self.origin_id)
        )
        self.hwm = {str(tbl): int(hwm) for tbl, hwm in marks}
        self.hwm_loaded = dict(self.hwm)
        self.hwm_saved = dict(self.hwm)

    def _central_ids(self, tbl: str, keys: list[int]) -> list[tuple[int, int]]:
        """The central ids of the source ids `keys` of `tbl` (those the centre maps)."""
        rows = self.central.execute(
            select(IDS.c.src_id, IDS.c.dest_id).where(
                IDS.c.origin_id == self.origin_id,
                IDS.c.tbl == tbl,
                # the range lets PostgreSQL seek the key's third column on the index (a list
                # alone is a filter on every entry of the table while it has no statistics)
                IDS.c.src_id.between(min(keys), max(keys)),
                IDS.c.src_id.in_(keys),
                IDS.c.dest_id.is_not(None),
            )
        )
        return [(int(s), int(d)) for s, d in rows]

    def _read_maps(self, which: ColumnElement[bool]) -> None:
        rows = self.central.execute(
            select(IDS.c.tbl, IDS.c.src_id, IDS.c.dest_id, IDS.c.dest_sub, IDS.c.hash).where(
                IDS.c.origin_id == self.origin_id, which
            )
        )
        for tbl, src_id, dest_id, dest_sub, hashed in rows:
            self.maps.setdefault(tbl, {})[int(src_id)] = [dest_id, dest_sub, hashed]
            if tbl in self.ids and dest_id is not None:
                self.ids[tbl][int(src_id)] = int(dest_id)

    def _append_tops(self) -> dict[str, int]:
        """The highest id of every append table, in one query: a table whose top is at its
        mark has nothing new (the common case of a sync with nothing new)."""
        tables = [model_table(r) for r in RULES if r.kind == "append" and r.table in self.have]
        if not tables:
            return {}
        tops = self.src.execute(
            select(*(select(func.max(t.c.id)).scalar_subquery().label(t.name) for t in tables))
        ).one()
        return {t.name: int(top or 0) for t, top in zip(tables, tops, strict=True)}

    def _apply_fixups(self, *, final: bool) -> None:
        """Set the links that named rows sent later in this sync (a child run's parent sent
        in the same batch, a session's head turn): the backend sets each table's column for
        all of its rows at once (`Backend.update_rows`: one statement on PostgreSQL), not
        one per row. Before the `final` call (a slice's end) the links whose row is not
        sent yet wait for a later slice."""
        batches: dict[tuple[str, str], list[tuple[int, ...]]] = {}
        rules: dict[str, Rule] = {}
        waiting = []
        asked: dict[str, set[int]] = {}
        for fixup in self.fixups:
            asked.setdefault(fixup[3], set()).add(fixup[4])
        for target, sources in asked.items():  # a statement a chunk, not one a link
            ids = self.ids[target]
            if isinstance(ids, CentralIds):
                ids.fetch(sources)
        for fixup in self.fixups:
            rule, (dest_id, sub), column, target, source, key = fixup
            mapped = self.ids[target].get(source)
            if mapped is None and not final:
                waiting.append(fixup)
                continue
            self.waiting[(rule.table, key)] -= 1
            if mapped is None:
                self.counts.orphans[f"{rule.table}.{column}"] += 1
                continue
            rules[rule.table] = rule
            found = (dest_id, sub) if rule.key == "rowid" else (dest_id,)
            batches.setdefault((rule.table, column), []).append((*found, mapped))
        for (name, column), rows in batches.items():
            rule = rules[name]
            keys = ("run_id", "step") if rule.key == "rowid" else (_KEY_COLUMN[rule.key],)
            self.backend.update_rows(self.dst, model_table(rule), keys, [column], rows)
        self.fixups = waiting

    def _end_slice(self) -> None:
        """Commit the current slice with its settled links, maps and marks, and begin the
        next."""
        assert self.slices is not None
        self._apply_fixups(final=False)
        self._save(final=False)
        self.slices.commit()
        self._dst = None  # the next slice begins at its first statement
        self.in_slice = 0
        self._shed()

    def _unsettled(self, key: tuple[str, int]) -> bool:
        return self.waiting[key] > 0 or (key[0] == RUNS and key[1] in self.reloading)

    def _delete_gone_runs(self) -> None:
        """Delete centrally the runs deleted in the source, with their append rows (their
        state rows went with the tables' own deletions)."""
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
            self.dst.execute(delete(runs).where(runs.c.id.in_(dest)))
            self.counts.deleted[RUNS] += len(dest)
            # a run's map says it is gone in the transaction that deletes it
            self.map_changed.extend(changes[s] for s, _ in part)
            self._slice_done(len(part))

    def _write_new_maps(self) -> None:
        """Insert the id maps of the rows sent since the last write (`map_new`)."""
        if self.map_new:
            o = self.origin_id
            self.backend.bulk_insert(
                self.dst,
                IDS,
                MAP_COLUMNS,
                ((o, m["t"], m["s"], m["d"], m["d2"], m["h"]) for m in self.map_new),
            )
        self.map_new = []

    def _save(self, *, final: bool) -> None:
        """Write the id maps' changes and the high-water marks. Before the `final` save (a
        slice's) an unsettled row's map is saved `UNSETTLED` (a run to be sent again with
        the goal it had), and its own once it settles."""
        o = self.origin_id
        if final:
            self._finding_marks()
        for key in list(self.flushed_unsettled):
            if final or not self._unsettled(key):
                self.flushed_unsettled.discard(key)
                entry = self.maps.get(key[0], {}).get(key[1])
                if entry is not None:
                    self.map_changed.append(
                        {"t": key[0], "s": key[1], "d": entry[0], "d2": entry[1], "h": entry[2]}
                    )
        if not final:
            for changes in (self.map_new, self.map_changed):
                for at, change in enumerate(changes):
                    key = (str(change["t"]), int(change["s"]))
                    if change["h"] is None or not self._unsettled(key):
                        continue
                    changes[at] = change = {**change, "h": UNSETTLED}
                    if key[0] == RUNS and key[1] in self.reloading:
                        change["d2"] = self.reloading[key[1]]
                    self.flushed_unsettled.add(key)
        self._write_new_maps()
        self.backend.update_rows(
            self.dst,
            IDS,
            MAP_COLUMNS[:3],
            MAP_COLUMNS[3:],
            [(o, m["t"], m["s"], m["d"], m["d2"], m["h"]) for m in self.map_changed],
        )
        self.backend.delete_rows(
            self.dst, IDS, MAP_COLUMNS[:3], [(o, m["t"], m["s"]) for m in self.map_gone]
        )
        self.map_new, self.map_changed, self.map_gone = [], [], []
        if self.hwm == self.hwm_saved:
            return
        self.dst.execute(delete(MARKS).where(MARKS.c.origin_id == o))
        if self.hwm:
            self.dst.execute(
                insert(MARKS),
                [{"origin_id": o, "tbl": t, "hwm": h} for t, h in sorted(self.hwm.items())],
            )
        self.hwm_saved = dict(self.hwm)
