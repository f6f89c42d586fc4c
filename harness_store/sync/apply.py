"""Sending one origin's snapshot into the destination, inside the caller's transaction.

`OriginSync.run` reads every table of the source snapshot through its rule (`rules.RULES`):
state tables row by row against the hashes recorded last time, append tables from the
high-water mark on. Links are remapped through the id maps of runs, sessions and turns, which
grow as this sync inserts. Nothing is committed here: the caller commits the rows, the id maps
and the marks together, so a sync killed at any point leaves the destination as the last
completed sync of this origin left it, and the next sync redoes the whole difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)

from ..dialects import backend_named
from .report import TableCounts
from .rows import (
    ROWID,
    Unlinked,
    digest,
    event_json_for,
    insert_returning_ids,
    model_table,
    remap,
    source_columns,
    source_columns_of,
    source_select,
)
from .rules import RULES, RUNS, SESSIONS, TURNS, Rule
from .tables import IDS, MARKS

Entry = list[Any]
"""An id-map entry: `[dest_id, dest_sub, hash]`."""

BATCH = 5000

STATE_MARK = "#"
"""Prefix of a state table's mark: the hash of all its rows (in key order) when last synced."""

ANCHOR_MARK = "@"
"""Prefix of an append table's mark: the hash of the facts (integers and stamps) of the row at
its high-water mark, which tells a source whose history went back (a restored backup) from one
that only grew."""

TEXT_MARK = "~"
"""Prefix of an append table's mark: how many of its text values up to the high-water mark
were non-empty, which tells that rows already sent were cleared (an archived session)."""

CHUNK = 500
"""Ids per `IN (…)` list."""


def chunks(values: list[int]) -> Iterator[list[int]]:
    """`values` in lists of at most `CHUNK`."""
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


def anchor_columns(columns: Iterable[Column[Any]]) -> list[Column[Any]]:
    """The columns an archive never changes: integers and time stamps."""
    return [
        c
        for c in columns
        if isinstance(c.type, Integer) or c.name == "at" or c.name.endswith("_at")
    ]


def text_columns(columns: Iterable[Column[Any]]) -> list[Column[Any]]:
    """The text columns an archive may clear (everything textual but the stamps)."""
    anchors = {c.name for c in anchor_columns(columns)}
    return [c for c in columns if isinstance(c.type, String) and c.name not in anchors]


def nonempty(columns: list[Column[Any]]) -> Any:
    """How many of `columns` are neither NULL nor '' in a row, as a SQL expression."""
    return sum((case((c != "", 1), else_=0) for c in columns), start=0)


class OriginSync:
    """One origin's sync: loads its id maps and marks, writes the difference, saves them."""

    def __init__(
        self,
        src: Connection,
        dst: Connection,
        origin_id: int,
        have: Mapping[str, frozenset[str]],
        counts: TableCounts,
        on_rows: Callable[[int], None] | None = None,
        batch_size: int = BATCH,
        *,
        fresh: bool = False,
        check_pages: Callable[[], None] | None = None,
    ) -> None:
        self.fresh = fresh  # a new origin: nothing of it is in the destination yet
        self.check_pages = check_pages
        """Raises when the source's pages are damaged; called before the first write."""
        self.scan_texts = False
        self.src, self.dst, self.origin_id, self.have = src, dst, origin_id, have
        self.backend = backend_named(dst.dialect.name)
        self.counts, self.on_rows, self.batch_size = counts, on_rows, batch_size
        self.maps: dict[str, dict[int, Entry]] = {}
        self.ids: dict[str, dict[int, int]] = {RUNS: {}, SESSIONS: {}, TURNS: {}}
        self.hwm: dict[str, int] = {}
        self.hwm_loaded: dict[str, int] = {}
        self.tops: dict[str, int] = {}
        self.fixups: list[tuple[Rule, tuple[int, int | None], str, str, int]] = []
        self.reload_runs: set[int] = set()
        self.gone_runs: dict[int, int] = {}
        self.map_new: list[dict[str, Any]] = []
        self.map_changed: list[dict[str, Any]] = []
        self.map_gone: list[dict[str, Any]] = []
        self.reread: str | None = None
        """Why the origin was read again in full (its history went backwards), or None."""
        self.uncovered = False
        """Whether a memory entry that may shadow another origin's was deleted centrally."""

    # --- the whole origin ------------------------------------------------------------------

    def run(self) -> None:
        """Send everything that changed since the last sync of this origin.

        The source's pages are checked (`check_pages`) before anything is written, when there
        is anything to write: a sync that finds nothing new reads only the tops of the append
        tables and the state tables, and spares the check's read of the whole file."""
        reason = None
        if not self.fresh:
            self._load()
            reason = self._rewound()
        self.tops = self._append_tops()
        read = {
            rule.table: self._read_state(rule)
            for rule in RULES
            if rule.kind == "state" and rule.table in self.have
        }
        state_changed = any(
            self.hwm_loaded.get(STATE_MARK + table) != total for table, (*_, total) in read.items()
        )
        grown = any(top > self.hwm.get(table, 0) for table, top in self.tops.items())
        work = self.fresh or reason is not None or state_changed or grown
        if work and self.check_pages is not None:
            self.check_pages()
        # an archive changes state rows too (turns, runs): only then are the append tables'
        # texts counted again
        self.scan_texts = state_changed
        if reason is not None:
            self._forget()
            self.reread = reason
            self.fresh = True
            self.maps = {}
            self.ids = {RUNS: {}, SESSIONS: {}, TURNS: {}}
            self.hwm, self.hwm_loaded = {}, {}
        for tbl in self.ids:
            self.maps.setdefault(tbl, {})
        # one query for the id maps of every table that changed (a table without a mark was
        # never synced from this origin: it has no map to read)
        changed = [
            table
            for table, (_, _, total) in read.items()
            if table not in self.ids and self.hwm_loaded.get(STATE_MARK + table) != total
        ]
        if changed and not self.fresh:
            self._read_maps(IDS.c.tbl.in_(changed))
        for rule in RULES:
            if rule.table not in self.have:
                continue
            if rule.kind == "state":
                self._sync_state(rule, *read.pop(rule.table))
            else:
                self._sync_append(rule)
        self._apply_fixups()
        self._delete_gone_runs()
        if self.uncovered:
            self._uncover_shadowed()
        self._save()

    # --- a source whose history went backwards ---------------------------------------------

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

    def _forget(self) -> None:
        """Delete every central row of this origin, its id maps and marks: it is sent again
        in full, as a new origin's would be (its runs get new central ids)."""
        self._read_maps(IDS.c.tbl.not_in(list(self.ids)))
        runs = self._dest_ids(RUNS)
        for rule in reversed(RULES):
            if rule.referenced:
                continue
            table = model_table(rule)
            if rule.kind == "append" or rule.key in ("run", "rowid"):
                assert rule.run_column is not None
                self._delete_in(table, table.c[rule.run_column], runs)
            else:
                ids = self._dest_ids(rule.table)
                self._delete_in(table, table.c.id, ids)
                if rule.table == "memory" and ids:
                    self.uncovered = True
        run_table, sessions, turns = (model_table(r) for r in RULES[:3])
        for part in chunks(self._dest_ids(SESSIONS)):
            self.dst.execute(
                update(sessions).where(sessions.c.id.in_(part)).values(head_turn_id=None)
            )
        self._delete_in(turns, turns.c.id, self._dest_ids(TURNS))
        self._delete_in(sessions, sessions.c.id, self._dest_ids(SESSIONS))
        for part in chunks(runs):
            self.dst.execute(
                update(run_table).where(run_table.c.id.in_(part)).values(parent_run_id=None)
            )
        self._delete_in(run_table, run_table.c.id, runs)
        self.dst.execute(delete(IDS).where(IDS.c.origin_id == self.origin_id))
        self.dst.execute(delete(MARKS).where(MARKS.c.origin_id == self.origin_id))

    def _dest_ids(self, table: str) -> list[int]:
        return sorted({int(e[0]) for e in self.maps.get(table, {}).values() if e[0] is not None})

    def _delete_in(self, table: Table, column: Any, ids: list[int]) -> None:
        for part in chunks(ids):
            self.dst.execute(delete(table).where(column.in_(part)))

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

    def _load(self) -> None:
        """The id maps of the referenced tables (every sync needs them for links) and the
        marks; other tables' maps are read only when their rows changed."""
        self._read_maps(IDS.c.tbl.in_(list(self.ids)))
        marks = self.dst.execute(
            select(MARKS.c.tbl, MARKS.c.hwm).where(MARKS.c.origin_id == self.origin_id)
        )
        self.hwm = {str(tbl): int(hwm) for tbl, hwm in marks}
        self.hwm_loaded = dict(self.hwm)

    def _read_maps(self, which: ColumnElement[bool]) -> None:
        rows = self.dst.execute(
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

    def _sent(self, rows: int) -> None:
        if self.on_rows is not None and rows:
            self.on_rows(rows)

    # --- state tables ----------------------------------------------------------------------

    def _read_state(self, rule: Rule) -> tuple[list[str], list[Any], int]:
        """A state table's column names, rows (in key order) and the hash of them all."""
        columns = source_columns(rule, self.have)
        cursor = self._raw(source_select(rule, columns))
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
        return names, rows, digest(rows)

    def _sync_state(self, rule: Rule, names: list[str], rows: list[Any], total: int) -> None:
        """A table that hashes as it did last time is unchanged (its id map was not even
        read); otherwise its rows are compared one by one with the hashes last sent."""
        table = model_table(rule)
        key_at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
        mark = STATE_MARK + rule.table
        self.hwm[mark] = total
        if self.hwm_loaded.get(mark) == total:
            return
        hashes = [digest(row) for row in rows]
        old = self.maps.setdefault(rule.table, {})
        seen: set[int] = set()
        new: list[tuple[int, int, dict[str, Any]]] = []
        changed: list[tuple[int, int, dict[str, Any]]] = []
        for row, hashed in zip(rows, hashes, strict=True):
            key = int(row[key_at])
            seen.add(key)
            entry = old.get(key)
            if entry is None:
                new.append((key, hashed, dict(zip(names, row, strict=True))))
            elif entry[2] != hashed:
                changed.append((key, hashed, dict(zip(names, row, strict=True))))
        gone = [
            k for k, e in old.items() if k not in seen and (e[2] is not None or rule.table != RUNS)
        ]
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
        if rule.replace:
            self._delete_rows(rule, table, [old[k] for k, _, _ in changed])
            self._insert_state(rule, table, [(k, h, r, True) for k, h, r in changed])
        else:
            self._update_state(rule, table, changed)
        self._insert_state(rule, table, [(k, h, r, False) for k, h, r in new])

    def _dest_where(self, rule: Rule, table: Table) -> ColumnElement[bool]:
        """The WHERE that finds a central row from bound `k` (and `k2`, the step)."""
        if rule.key == "rowid":
            return and_(table.c.run_id == bindparam("k"), table.c.step == bindparam("k2"))
        column = table.c.run_id if rule.key == "run" else table.c.id
        return column == bindparam("k")

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
            self.map_changed.append({"t": RUNS, "s": key, "d": entry[0], "d2": entry[1], "h": None})

    def _remap(self, rule: Rule, table: Table, row: dict[str, Any], later: list[Any]) -> Any:
        nullable = {c: bool(table.c[c].nullable) for c in rule.links}
        return remap(rule, row, self.ids, nullable, later)

    def _update_state(
        self, rule: Rule, table: Table, changed: list[tuple[int, int, dict[str, Any]]]
    ) -> None:
        if not changed:
            return
        old = self.maps[rule.table]
        by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for key, hashed, row in changed:
            entry = old[key]
            later: list[tuple[str, int]] = []
            try:
                values = self._remap(rule, table, row, later)
            except Unlinked:
                self.counts.orphans[rule.table] += 1
                continue
            if rule.table == RUNS:
                goal = digest((row.get("goal"),))
                if entry[1] != goal:
                    self.reload_runs.add(key)
                entry[1] = goal
            entry[2] = hashed
            dest_key = (int(entry[0]), entry[1] if rule.key == "rowid" else None)
            for column, source in later:
                self.fixups.append((rule, dest_key, column, rule.links[column], source))
            params = {f"v_{c}": v for c, v in values.items()}
            params.update(k=entry[0], k2=entry[1])
            by_columns.setdefault(tuple(values), []).append(params)
            self.map_changed.append(
                {"t": rule.table, "s": key, "d": entry[0], "d2": entry[1], "h": hashed}
            )
        for columns, batch in by_columns.items():
            statement = (
                update(table)
                .where(self._dest_where(rule, table))
                .values({c: bindparam(f"v_{c}") for c in columns})
            )
            self.dst.execute(statement, batch)
            self.counts.updated[rule.table] += len(batch)
            self._sent(len(batch))

    def _insert_state(
        self, rule: Rule, table: Table, items: list[tuple[int, int, dict[str, Any], bool]]
    ) -> None:
        if not items:
            return
        old = self.maps[rule.table]
        ready: list[tuple[int, int, dict[str, Any], bool, dict[str, Any], list[Any]]] = []
        for key, hashed, row, existed in items:
            later: list[tuple[str, int]] = []
            try:
                values = self._remap(rule, table, row, later)
            except Unlinked:
                self.counts.orphans[rule.table] += 1
                if existed:  # its central row was deleted above: forget it
                    self.map_gone.append({"t": rule.table, "s": key})
                    del old[key]
                continue
            ready.append((key, hashed, row, existed, values, later))
        if not ready:
            return
        if rule.table == "memory":
            dest_ids = [self._insert_memory(table, values) for *_, values, _ in ready]
        elif rule.key == "id":
            dest_ids = list(insert_returning_ids(self.dst, table, [v for *_, v, _ in ready]))
        else:
            self.dst.execute(insert(table), [values for *_, values, _ in ready])
            dest_ids = [int(values["run_id"]) for *_, values, _ in ready]
        for (key, hashed, row, existed, values, later), dest_id in zip(
            ready, dest_ids, strict=True
        ):
            if rule.key == "rowid":
                sub: int | None = int(values["step"])
            elif rule.table == RUNS:
                sub = digest((row.get("goal"),))
            else:
                sub = None
            if dest_id is not None and rule.table in self.ids:
                self.ids[rule.table][key] = dest_id
            old[key] = [dest_id, sub, hashed]
            change = {"t": rule.table, "s": key, "d": dest_id, "d2": sub, "h": hashed}
            (self.map_changed if existed else self.map_new).append(change)
            if dest_id is not None:
                dest_key = (dest_id, sub if rule.key == "rowid" else None)
                for column, source in later:
                    self.fixups.append((rule, dest_key, column, rule.links[column], source))
        if rule.replace and any(existed for *_, existed, _, _ in ready):
            n = sum(1 for *_, existed, _, _ in ready if existed)
            self.counts.updated[rule.table] += n
            self.counts.inserted[rule.table] += len(ready) - n
        else:
            self.counts.inserted[rule.table] += len(ready)
        self._sent(len(ready))

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

    # --- append tables ---------------------------------------------------------------------

    def _sync_append(self, rule: Rule) -> None:
        table = model_table(rule)
        columns = source_columns(rule, self.have)
        assert rule.run_column is not None
        hwm = self.hwm.get(rule.table, 0)
        source_run = table.c[rule.run_column]
        texts = text_columns(columns)
        reload = set(self.reload_runs)
        text_total = 0
        kept = self.hwm.get(TEXT_MARK + rule.table)
        if hwm and texts and (self.scan_texts or kept is None):
            text_total = int(
                self.src.execute(
                    select(func.coalesce(func.sum(nonempty(texts)), 0)).where(table.c.id <= hwm)
                ).scalar_one()
            )
            if kept is not None and kept != text_total:
                reload |= self._cleared_runs(table, source_run, texts, hwm)
        elif kept is not None:
            text_total = kept
        reload -= set(self.gone_runs)
        if reload and hwm:
            dest_runs = [self.ids[RUNS][r] for r in reload if r in self.ids[RUNS]]
            for part in chunks(sorted(dest_runs)):
                self.dst.execute(delete(table).where(table.c[rule.run_column].in_(part)))
            statement = (
                select(*columns)
                .where(source_run.in_(sorted(reload)), table.c.id <= hwm)
                .order_by(table.c.id)
            )
            self._send(rule, table, statement, reloaded=True)
        if self.tops.get(rule.table, 0) > hwm:
            statement = select(*columns).where(table.c.id > hwm).order_by(table.c.id)
            top, sent_texts, anchor = self._send(rule, table, statement, reloaded=False)
            if top > hwm:
                self.hwm[rule.table] = top
                self.hwm[ANCHOR_MARK + rule.table] = anchor
            text_total += sent_texts
        if texts and self.hwm.get(rule.table, 0):
            self.hwm[TEXT_MARK + rule.table] = text_total

    def _cleared_runs(
        self, table: Table, source_run: Any, texts: list[Column[Any]], hwm: int
    ) -> set[int]:
        """The source runs whose rows of `table` (up to `hwm`) hold another number of
        non-empty text values than their central rows: cleared since (an archive)."""
        count = func.sum(nonempty(texts))
        here = {
            int(run): int(n or 0)
            for run, n in self.src.execute(
                select(source_run, count).where(table.c.id <= hwm).group_by(source_run)
            )
        }
        to_source = {dest: src for src, dest in self.ids[RUNS].items()}
        central_run = table.c[source_run.name]
        there: dict[int, int] = {}
        for part in chunks(sorted(to_source)):
            rows = self.dst.execute(
                select(central_run, count).where(central_run.in_(part)).group_by(central_run)
            )
            there.update({to_source[int(run)]: int(n or 0) for run, n in rows})
        return {
            run
            for run in set(here) | set(there)
            if run in self.ids[RUNS] and here.get(run, 0) != there.get(run, 0)
        }

    def _raw(self, statement: Any) -> Any:
        """Run a SELECT on the source's own driver connection (inside the snapshot's
        transaction): the rows of the bulk path come as plain tuples, without the per-row
        work of a SQLAlchemy result."""
        return backend_named(self.src.dialect.name).driver_rows(self.src, statement)

    def _send(
        self, rule: Rule, table: Table, statement: Any, *, reloaded: bool
    ) -> tuple[int, int, int]:
        """Stream rows of an append table into the destination as they are read (on
        PostgreSQL one COPY a table, so the server works while the source is read); the
        highest id read, how many non-empty text values were read, and the hash of the
        last row's facts (`ANCHOR_MARK`)."""
        top = 0
        texts_read = 0
        last: Any = None
        nullable = {c: bool(table.c[c].nullable) for c in rule.links}
        cursor = self._raw(statement)
        target = self.counts.updated if reloaded else self.counts.inserted
        keys = [d[0] for d in cursor.description]
        names = [c for c in keys if c != "id"]
        links = [
            (names.index(c), self.ids[t], nullable[c]) for c, t in rule.links.items() if c in names
        ]
        id_at = keys.index("id")
        keep = [i for i, c in enumerate(keys) if c != "id"]
        present = [table.c[k] for k in keys]
        text_at = [keys.index(c.name) for c in text_columns(present)]
        anchor_at = [keys.index(c.name) for c in anchor_columns(present)]
        event_at = (
            (names.index("json"), names.index("run_id")) if rule.table == "run_events" else None
        )
        run_ids = self.ids[RUNS]

        def rows() -> Iterator[list[Any]]:
            nonlocal top, texts_read, last
            while batch := cursor.fetchmany(self.batch_size):
                sent = 0
                for row in batch:
                    top = max(top, int(row[id_at]))
                    last = row
                    texts_read += sum(1 for i in text_at if row[i])
                    values = [row[i] for i in keep]
                    try:
                        for at, ids, may_be_null in links:
                            if values[at] is not None:
                                mapped = ids.get(values[at])
                                if mapped is None and not may_be_null:
                                    raise Unlinked(names[at])
                                values[at] = mapped
                    except Unlinked:
                        self.counts.orphans[rule.table] += 1
                        continue
                    if event_at is not None:
                        values[event_at[0]] = event_json_for(values[event_at[0]], run_ids)
                    sent += 1
                    yield values
                target[rule.table] += sent
                self._sent(sent)

        self.backend.bulk_insert(self.dst, table, names, rows())
        anchor = digest(tuple(last[i] for i in anchor_at)) if last is not None else 0
        return top, texts_read, anchor

    # --- after every table -----------------------------------------------------------------

    def _apply_fixups(self) -> None:
        """Set the links that named rows sent later in this sync (a session's head turn)."""
        for rule, (dest_id, sub), column, target, source in self.fixups:
            mapped = self.ids[target].get(source)
            if mapped is None:
                self.counts.orphans[f"{rule.table}.{column}"] += 1
                continue
            table = model_table(rule)
            self.dst.execute(
                update(table).where(self._dest_where(rule, table)).values({column: mapped}),
                {"k": dest_id, "k2": sub},
            )

    def _delete_gone_runs(self) -> None:
        """Delete centrally the runs deleted in the source, with their append rows (their
        state rows went with the tables' own deletions)."""
        if not self.gone_runs:
            return
        dest = sorted(self.gone_runs.values())
        for rule in RULES:
            if rule.kind != "append" or rule.table not in self.have:
                continue
            table = model_table(rule)
            assert rule.run_column is not None
            gone = self.dst.execute(delete(table).where(table.c[rule.run_column].in_(dest)))
            self.counts.deleted[rule.table] += max(gone.rowcount, 0)
        runs = model_table(RULES[0])
        self.dst.execute(delete(runs).where(runs.c.id.in_(dest)))
        self.counts.deleted[RUNS] += len(dest)

    def _save(self) -> None:
        """Write the id maps' changes and the high-water marks."""
        o = self.origin_id
        if self.map_new:
            self.dst.execute(
                insert(IDS),
                [
                    {
                        "origin_id": o,
                        "tbl": m["t"],
                        "src_id": m["s"],
                        "dest_id": m["d"],
                        "dest_sub": m["d2"],
                        "hash": m["h"],
                    }
                    for m in self.map_new
                ],
            )
        where = and_(
            IDS.c.origin_id == o, IDS.c.tbl == bindparam("t"), IDS.c.src_id == bindparam("s")
        )
        if self.map_changed:
            self.dst.execute(
                update(IDS)
                .where(where)
                .values(dest_id=bindparam("d"), dest_sub=bindparam("d2"), hash=bindparam("h")),
                self.map_changed,
            )
        if self.map_gone:
            self.dst.execute(delete(IDS).where(where), self.map_gone)
        if self.hwm == self.hwm_loaded:
            return
        self.dst.execute(delete(MARKS).where(MARKS.c.origin_id == o))
        if self.hwm:
            self.dst.execute(
                insert(MARKS),
                [{"origin_id": o, "tbl": t, "hwm": h} for t, h in sorted(self.hwm.items())],
            )
