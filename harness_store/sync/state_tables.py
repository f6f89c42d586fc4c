"""A sync's state tables (runs, sessions, memory, …): read (whole while small, else the rows
that may have changed, `finding`), hashed, and compared row by row with the hashes sent last
time; new rows inserted, changed ones updated (or replaced), gone ones deleted."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Table, bindparam, delete, insert, select, update

from ..models.sync import IDS
from .finding import FINISHED, KEY_MARK, OPEN_MARK, CentralIds, ChangedRows
from .origin_state import HELD_MARK, ROUND_TRIP_ROWS, STATE_MARK, Entry, chunks
from .rows import (
    ROWID,
    Remapped,
    RowsDigest,
    digest,
    digest_each,
    model_table,
    remap,
    source_columns,
    source_select,
)
from .rules import RUNS, SESSIONS, TURNS, Rule

ADOPT_MAP_COLUMNS = ("origin_id", "tbl", "src_id", "dest_id", "dest_sub", "hash")
"""An id map's columns as an adopted copy's map rows are written (`IDS`)."""

STATE_SELECTS: dict[tuple[str, tuple[str, ...]], str] = {}
"""The SQL of each state table's read, by table and the columns the source has: compiled once
for every pass (a follower makes many), as it has no parameters."""


NULLABLE: dict[str, dict[str, bool]] = {}
"""Per state table, whether each of its links may be NULL (`remap`), found once."""


class StateTables(ChangedRows):
    """Sending the state tables of one origin."""

    def _state_cursor(self, rule: Rule) -> tuple[Any, list[str]]:
        """A cursor over `rule`'s source table in key order, and its column names: the one
        statement every reader of a state table runs, compiled once a shape."""
        columns = source_columns(rule, self.have)
        key = (rule.table, tuple(c.name for c in columns))
        sql = STATE_SELECTS.get(key)
        if sql is None:
            statement = source_select(rule, columns)
            sql = STATE_SELECTS[key] = str(statement.compile(dialect=self.src.dialect))
        cursor = self._raw_sql(sql)
        return cursor, [d[0] for d in cursor.description]

    def _stream_state(self, rule: Rule) -> None:
        """Send every row of `rule`'s table of a new origin (nothing of it central yet), read
        a batch at a time: each part's rows inserted, its id maps written (`_shed`) and
        forgotten before the next is read, so memory holds a batch, whatever the table's
        size. Rows of runs held back are skipped as `_sync_state` skips them."""
        table = model_table(rule)
        cursor, names = self._state_cursor(rule)
        key_at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
        status_at = names.index("status") if rule.table == RUNS and "status" in names else None
        held = self._held_test(rule, names)
        weight = ROUND_TRIP_ROWS if rule.table == "memory" else 1
        size = max(1, self.slice_rows // weight) if self.slices is not None else self.batch_size
        self.maps.setdefault(rule.table, {})
        opened: set[int] = set()
        total = RowsDigest()
        skipped = False
        last: int | None = None
        while batch := cursor.fetchmany(self.batch_size):
            hashes = total.add_each(batch)
            last = int(batch[-1][key_at])
            new: list[tuple[Any, int]] = []
            for row, hashed in zip(batch, hashes, strict=True):
                if status_at is not None and row[status_at] not in FINISHED:
                    opened.add(int(row[key_at]))
                if held is not None and held(row):
                    skipped = True  # its run is held back: neither sent nor gone
                    continue
                new.append((row, hashed))
            for start in range(0, len(new), size):
                rows = new[start : start + size]
                self._prefetch_links(rule, names, [r for r, _ in rows])
                part = [(int(r[key_at]), hashed, r, False) for r, hashed in rows]
                self._insert_state(rule, table, names, part)
                self._slice_done(len(part) * weight)
                self._shed()
        if last is not None:
            self.pending[rule.table] = {KEY_MARK + rule.table: last}
        if status_at is not None:
            self.pending_open = opened
        self.hwm[STATE_MARK + rule.table] = HELD_MARK if skipped else total.value()
        self._state_marks(rule)

    def _adopt_state(self, rule: Rule) -> None:
        """The id map and marks a sync sending every row of `rule`'s table would leave, its
        rows being in the destination already under their own ids (`adopt`): the source is
        read a batch at a time, each batch's map rows written before the next is read, and
        the links a row needs looked up in the maps written so far, so memory holds a batch,
        whatever the table's size. A row whose NOT NULL link names no row mapped is an
        orphan, as a sync finds it, and gets no map."""
        table = model_table(rule)
        cursor, names = self._state_cursor(rule)
        key_at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
        needed = [
            (names.index(c), t)
            for c, t in rule.links.items()
            if c in names and not table.c[c].nullable
        ]
        run_at = names.index("run_id") if rule.key != "id" else None
        step_at = names.index("step") if rule.key == "rowid" else None
        goal_at = names.index("goal") if rule.table == RUNS and "goal" in names else None
        status_at = names.index("status") if rule.table == RUNS and "status" in names else None
        opened: set[int] = set()
        total = RowsDigest()
        last: int | None = None
        o = self.origin_id
        while batch := cursor.fetchmany(self.batch_size):
            total.add(batch)
            last = int(batch[-1][key_at])
            mapped = {
                at: {s for s, _ in self._mapped_ids(target, batch, at)} for at, target in needed
            }
            entries = []
            for row in batch:
                if any(row[at] is not None and row[at] not in mapped[at] for at, _ in needed):
                    self.counts.orphans[rule.table] += 1
                    continue
                src_id = int(row[key_at])
                dest_id = src_id if run_at is None else int(row[run_at])
                if step_at is not None:
                    sub: int | None = int(row[step_at])
                elif rule.table == RUNS:
                    sub = digest((row[goal_at] if goal_at is not None else None,))
                else:
                    sub = None
                if status_at is not None and row[status_at] not in FINISHED:
                    opened.add(src_id)
                entries.append((o, rule.table, src_id, dest_id, sub, digest(row)))
            if entries:
                self.backend.bulk_insert(self.dst, IDS, ADOPT_MAP_COLUMNS, entries)
            self.counts.inserted[rule.table] += len(entries)
        if last is not None:
            self.finished[KEY_MARK + rule.table] = last
        if rule.table == RUNS and status_at is not None:
            self.finished_open = opened
        self.hwm[STATE_MARK + rule.table] = total.value()

    def _mapped_ids(self, target: str, batch: list[Any], at: int) -> list[tuple[int, int]]:
        """The (source id, central id) pairs of `target`'s map this origin holds for the ids
        the column at `at` of `batch` names, a chunk a statement."""
        wanted = sorted({int(v) for row in batch if isinstance(v := row[at], int)})
        found: list[tuple[int, int]] = []
        for part in chunks(wanted):
            rows = self.central.execute(
                select(IDS.c.src_id, IDS.c.dest_id).where(
                    IDS.c.origin_id == self.origin_id,
                    IDS.c.tbl == target,
                    IDS.c.src_id.between(part[0], part[-1]),  # sought on the index (`_central_ids`)
                    IDS.c.src_id.in_(part),
                    IDS.c.dest_id.is_not(None),
                )
            )
            found.extend((int(s), int(d)) for s, d in rows)
        return found

    def _state_marks(self, rule: Rule) -> None:
        """Keep the marks of `rule`'s table the read found, now that its rows are sent."""
        self.finished.update(self.pending.pop(rule.table, {}))
        if rule.table == RUNS and self.pending_open is not None:
            self.finished_open, self.pending_open = self.pending_open, None

    def _finding_marks(self) -> None:
        """Set the marks the reads found, at the pass's last save only: a pass killed between
        slices leaves the last pass's, so the next reads again every row above them (those
        a slice committed unsettled among them)."""
        self.hwm.update(self.finished)
        if self.finished_open is not None:
            for mark in [m for m in self.hwm if m.startswith(OPEN_MARK)]:
                del self.hwm[mark]
            self.hwm.update({f"{OPEN_MARK}{run}": 1 for run in self.finished_open})

    def _prefetch_links(self, rule: Rule, names: list[str], rows: Iterable[Any]) -> None:
        """Read the central ids the rows' links name, a chunk a statement, before they are
        remapped one by one."""
        for column, target in rule.links.items():
            ids = self.ids.get(target)
            if isinstance(ids, CentralIds) and column in names:
                at = names.index(column)
                ids.fetch(r[at] for r in rows if isinstance(r[at], int))

    def _sync_state(self, rule: Rule, names: list[str], rows: list[Any], total: int) -> None:
        """A table that hashes as it did last time is unchanged (its id map was not even
        read); otherwise its rows are compared one by one with the hashes last sent."""
        table = model_table(rule)
        key_at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
        mark = STATE_MARK + rule.table
        if self.hwm_loaded.get(mark) == total:
            self.hwm[mark] = total
            self._state_marks(rule)
            return
        old = self.maps.setdefault(rule.table, {})
        seen: set[int] = set()
        new: list[tuple[int, int, Any]] = []
        changed: list[tuple[int, int, Any]] = []
        held = self._held_test(rule, names)
        skipped = False
        for row in rows:
            hashed = digest(row)
            key = int(row[key_at])
            seen.add(key)
            if held is not None and held(row):
                skipped = True  # its run is held back: neither sent nor gone
                continue
            entry = old.get(key)
            if entry is None:
                new.append((key, hashed, row))
            elif entry[2] != hashed:
                changed.append((key, hashed, row))
        gone = [
            k for k, e in old.items() if k not in seen and (e[2] is not None or rule.table != RUNS)
        ]
        if changed or gone:
            self.old_changed = True  # rows sent before changed: an archive, perhaps
        if rule.table == RUNS:
            self._runs_gone(gone)
        else:
            if rule.table == "memory" and any(old[k][0] is not None for k in gone):
                self.uncovered = True
            self._delete_rows(rule, table, [old[k] for k in gone])
            for key in gone:
                self.map_gone.append({"t": rule.table, "s": key})
                del old[key]
            self.counts.deleted[rule.table] += len(gone)
        # a slice's part: a memory entry is written with statements of its own
        weight = ROUND_TRIP_ROWS if rule.table == "memory" else 1
        size = max(1, self.slice_rows // weight) if self.slices is not None else len(rows) or 1
        self._prefetch_links(rule, names, [r for _, _, r in changed + new])
        self._write_changed(rule, table, names, changed, old, size, weight)
        for start in range(0, len(new), size):
            part = [(k, h, r, False) for k, h, r in new[start : start + size]]
            self._insert_state(rule, table, names, part)
            self._slice_done(len(part) * weight)
        # the whole table is sent (saved with the last slice), or compared again next time
        self.hwm[mark] = HELD_MARK if skipped else total
        self._state_marks(rule)

    def _held_test(self, rule: Rule, names: list[str]) -> Callable[[Any], bool] | None:
        """What tells a row of `rule`'s table (as read, its columns `names`) that this pass
        holds back: a row of a held run, a held session's row or turn; None when none is."""
        if not self.held:
            return None
        runs, sessions = self.held, self.held_sessions
        if rule.table == SESSIONS:
            at = names.index("id")
            return lambda row: row[at] in sessions
        column = "id" if rule.table == RUNS else rule.run_column
        if column is None or column not in names:
            return None
        at = names.index(column)
        if rule.table == TURNS and "session_id" in names:
            session_at = names.index("session_id")
            return lambda row: row[at] in runs or row[session_at] in sessions
        return lambda row: row[at] in runs

    def _delete_rows(self, rule: Rule, table: Table, entries: Iterable[Entry]) -> None:
        params = [{"k": e[0], "k2": e[1]} for e in entries if e[0] is not None]
        if params:
            self.dst.execute(delete(table).where(self._dest_where(rule, table)), params)

    def _runs_gone(self, gone: list[int]) -> None:
        """Runs deleted in the source (a pruned session): their rows go at the end; their id
        map stays (hash NULL) so rows that outlive them (memory) still link."""
        entries = self.maps[RUNS]
        for key in gone:
            entry = entries[key]
            self.gone_runs[key] = int(entry[0])
            entry[2] = None
            change = {"t": RUNS, "s": key, "d": entry[0], "d2": entry[1], "h": None}
            self.gone_changes.append(change)

    def _remap(self, rule: Rule, table: Table, names: list[str], rows: list[Any]) -> Remapped:
        """`remap` of `rows` (as read, their columns `names`) through this pass's ids."""
        nullable = NULLABLE.get(rule.table)
        if nullable is None:
            nullable = NULLABLE[rule.table] = {c: bool(table.c[c].nullable) for c in rule.links}
        return remap(rule, names, rows, self.ids, nullable)

    def _write_changed(
        self,
        rule: Rule,
        table: Table,
        names: list[str],
        changed: list[tuple[int, int, Any]],
        old: dict[int, Entry],
        size: int,
        weight: int,
    ) -> None:
        """Write rows sent before that changed, `size` at a time (a slice's part): replaced
        (deleted and inserted again) where the rule says so, else updated in place."""
        for start in range(0, len(changed), size):
            part = changed[start : start + size]
            if rule.replace:
                self._delete_rows(rule, table, [old[k] for k, _, _ in part])
                self._insert_state(rule, table, names, [(k, h, r, True) for k, h, r in part])
            else:
                self._update_state(rule, table, names, part)
            self._slice_done(len(part) * weight)

    def _update_state(
        self, rule: Rule, table: Table, names: list[str], changed: list[tuple[int, int, Any]]
    ) -> None:
        """Update rows sent before in place (`changed`: key, hash and row as read), one
        statement for them all; a run whose goal changed is sent again whole."""
        if not changed:
            return
        old = self.maps[rule.table]
        remapped = self._remap(rule, table, names, [r for _, _, r in changed])
        columns = remapped.names
        goals = self._goals(rule, remapped, range(len(changed)))
        params = []
        for at, ((key, hashed, _), values) in enumerate(
            zip(changed, zip(*remapped.columns, strict=True), strict=True)
        ):
            if at in remapped.orphans:
                self.counts.orphans[rule.table] += 1
                continue
            entry = old[key]
            if goals is not None:
                goal = goals[at]
                if entry[1] != goal:
                    self.reload_runs.add(key)
                    self.reloading.setdefault(key, entry[1])
                entry[1] = goal
            entry[2] = hashed
            dest_key = (int(entry[0]), entry[1] if rule.key == "rowid" else None)
            for column, source in remapped.later.get(at, ()):
                self.fixups.append((rule, dest_key, column, rule.links[column], source, key))
                self.waiting[(rule.table, key)] += 1
            row = {f"v_{c}": v for c, v in zip(columns, values, strict=True)}
            row.update(k=entry[0], k2=entry[1])
            params.append(row)
            self.map_changed.append(
                {"t": rule.table, "s": key, "d": entry[0], "d2": entry[1], "h": hashed}
            )
        if params:
            statement = (
                update(table)
                .where(self._dest_where(rule, table))
                .values({c: bindparam(f"v_{c}") for c in columns})
            )
            self.dst.execute(statement, params)
            self.counts.updated[rule.table] += len(params)
            self._sent(len(params))

    @staticmethod
    def _goals(rule: Rule, remapped: Remapped, rows: Iterable[int]) -> list[int] | None:
        """The hash of each of `rows`' goals (their positions in `remapped`), a run's map
        keeps to know its goal changed (a run whose goal changes is sent again); None for
        a table other than runs."""
        if rule.table != RUNS:
            return None
        if "goal" not in remapped.names:
            return digest_each((None,) for _ in rows)
        goals = remapped.columns[remapped.names.index("goal")]
        return digest_each((goals[at],) for at in rows)

    def _insert_state(
        self, rule: Rule, table: Table, names: list[str], items: list[tuple[int, int, Any, bool]]
    ) -> None:
        """Insert new (or replaced, `existed`) rows of `rule`'s table (key, hash, row as
        read with its columns `names`). A table keyed by its id takes the rows' central ids
        first (`Backend.new_ids`) and maps them before the links are remapped, so a link to
        a row of the same batch (a child run's parent, a turn's parent turn) is written with
        its row: only a link to a row not sent yet waits (`fixups`)."""
        if not items:
            return
        old = self.maps[rule.table]
        given = rule.key == "id" and rule.table != "memory"
        keep, taken, remapped = self._remapped(rule, table, names, items, given)
        if not keep:
            return
        columns = remapped.names
        values = remapped.columns
        if len(keep) < len(items):
            values = [[column[at] for at in keep] for column in values]
        dest_ids: list[int | None]
        if given:
            dest_ids = [taken[at] for at in keep]
            self.backend.bulk_insert(
                self.dst, table, ["id", *columns], zip(dest_ids, *values, strict=True)
            )
        elif rule.table == "memory":
            dest_ids = [
                self._insert_memory(table, dict(zip(columns, row, strict=True)))
                for row in zip(*values, strict=True)
            ]
        else:
            self.dst.execute(
                insert(table),
                [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)],
            )
            dest_ids = [int(v) for v in values[columns.index("run_id")]]
        subs: Sequence[int | None]
        if rule.key == "rowid":
            subs = [int(v) for v in values[columns.index("step")]]
        else:
            subs = self._goals(rule, remapped, keep) or [None] * len(keep)
        own = None if given else self.ids.get(rule.table)  # given ids are mapped already
        map_new, map_changed, later = self.map_new, self.map_changed, remapped.later
        for at, dest_id, sub in zip(keep, dest_ids, subs, strict=True):
            key, hashed, _, existed = items[at]
            if dest_id is not None and own is not None:
                own[key] = dest_id
            old[key] = [dest_id, sub, hashed]
            change = {"t": rule.table, "s": key, "d": dest_id, "d2": sub, "h": hashed}
            (map_changed if existed else map_new).append(change)
            if dest_id is not None and at in later:
                dest_key = (dest_id, sub if rule.key == "rowid" else None)
                for column, source in later[at]:
                    self.fixups.append((rule, dest_key, column, rule.links[column], source, key))
                    self.waiting[(rule.table, key)] += 1
        n = sum(1 for at in keep if items[at][3]) if rule.replace else 0
        self.counts.updated[rule.table] += n
        self.counts.inserted[rule.table] += len(keep) - n
        self._sent(len(keep))

    def _remapped(
        self,
        rule: Rule,
        table: Table,
        names: list[str],
        items: list[tuple[int, int, Any, bool]],
        given: bool,
    ) -> tuple[list[int], list[int | None], Remapped]:
        """The rows of `items` remapped (`remap`), the positions of those kept, and, when
        the central ids are `given` before the insert, each row's own; a row whose NOT NULL
        link names no row sent is an orphan, left out. Given ids are mapped before the
        remapping, so the rows' links among themselves resolve; an orphan's is taken back
        and the rows remapped again (a row may have named it)."""
        old = self.maps[rule.table]
        own = self.ids.get(rule.table) if given else None
        taken: list[int | None] = [None] * len(items)
        if given:
            taken = list(self.backend.new_ids(self.dst, table, len(items)))
        before: dict[int, int | None] = {}
        if own is not None:
            for (key, *_), dest in zip(items, taken, strict=True):
                before.setdefault(key, dict.get(own, key))
                own[key] = dest  # type: ignore[assignment]
        rows = [row for _, _, row, _ in items]
        orphans: set[int] = set()
        while True:
            remapped = self._remap(rule, table, names, rows)
            dropped = remapped.orphans - orphans
            orphans |= dropped
            if own is not None:
                for at in dropped:
                    key = items[at][0]
                    if before[key] is None:
                        own.pop(key, None)
                    else:
                        own[key] = before[key]  # type: ignore[assignment]
            if not dropped or own is None:
                break
        for at in sorted(orphans):
            key, _, _, existed = items[at]
            self.counts.orphans[rule.table] += 1
            if existed:  # its central row was deleted above: forget it
                self.map_gone.append({"t": rule.table, "s": key})
                old.pop(key, None)
        return [at for at in range(len(items)) if at not in orphans], taken, remapped

    def _insert_memory(self, table: Table, values: dict[str, Any]) -> int | None:
        """Insert a memory entry; one (workspace, key) is held centrally once, so an entry
        another origin holds is replaced when this one is as new or newer (its origin's map
        then says shadowed), and this one is shadowed when it is older."""
        held = self.dst.execute(
            select(table.c.id, table.c.created_at).where(
                table.c.workspace == values["workspace"], table.c.key == values["key"]
            )
        ).first()
        if held is not None:
            if str(values["created_at"]) < str(held.created_at):
                return None
            self.dst.execute(delete(table).where(table.c.id == held.id))
            self.dst.execute(
                update(IDS)
                .where(IDS.c.tbl == "memory", IDS.c.dest_id == held.id)
                .values(dest_id=None)
            )
        return int(
            self.dst.execute(insert(table).values(values).returning(table.c.id)).scalar_one()
        )
