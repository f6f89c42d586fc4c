"""Which rows of a state table a pass reads: the whole table while it is small, else only the
rows that may have changed since the last pass, so a pass costs what changed, not the
source's size.

Upstream (0.66, `src/state/*.rs`) updates the state tables in place mostly while a run is
live: its status, provider, outcome and turn kind, its lease renewed at every checkpoint, its
staged turns, tool attempts, context events, todos, approvals, questions and plans (a paused
run is not finished: it waits for the human who resolves them), the messages its agents read
and the queue they consume. Those rows are found by their run: the runs unfinished at the last
pass (`OPEN_MARK`), the runs new since, and the runs whose own row changed. New rows are those
above the table's key high-water mark (`KEY_MARK`). Sessions are found through their turns.

Some changes reach rows of finished runs: `archive_session` empties a session's runs' texts,
`delete_session` and `prune` delete them, `pin` and a rewind rewrite memory entries, a public
`set_status` may be called on any run, and any other writer (a repair, a foreign tool) may
change any row. A pass therefore also compares, in key order, a window of every big table
(`SCRUB_MARK`, at least `SCRUB_ROWS` keys and at least 1/`SCRUB_PASSES` of the table): every
row is compared at least once every `SCRUB_PASSES` passes, and such a change arrives within
that many passes. A table of at most `SCRUB_ROWS` keys is compared whole every pass, as
before; so is every table in the pass after a run held back changed (`holding`), and in a
pass that sends the origin whole (a big table read a batch at a time then, never held:
`whole_compare`).

A deletion reaches the centre at the next pass, wherever the window is (`ChangedRows.
_counts_agree`): each pass counts the source's rows at or below the table's key mark (the
count of the whole table, on its smallest index, less the rows above the mark) and the
origin's id map entries of that table (all at or below it, but a run's kept for its
links); a row deleted makes the source count fewer, and the table is then compared whole
that pass (every table, when it is the runs table: a prune takes a run's rows along). The
rows of runs held back (never sent, so never mapped) are counted out of both. An
insert cannot hide a deletion from the counts by a key above the mark (those are counted
apart), nor by a key the map holds (a key is a row's identity); it would need a key at or
below the mark the map lacks. SQLite gives such a key to a table with AUTOINCREMENT never;
to one without, only once every row above it is deleted, the row at the mark among them:
so the table is compared whole too when the row at its mark is gone. What stays is a row
whose key a writer chose (an outcome, a policy or a lease keyed by its run, written for a
finished run) inserted as another is deleted, and a table without AUTOINCREMENT whose rows
at the top were deleted and their keys given again up to the mark: to the centre those are
rows changed at their keys, which the window finds.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Set
from typing import Any

from sqlalchemy import ColumnElement, Table, and_, func, literal_column, select

from ..models.sync import IDS
from . import quarantine
from .origin_state import CHUNK, HELD_MARK, STATE_MARK, Entry, OriginState, chunks
from .rows import ROWID, digest, model_table, source_columns, source_select
from .rules import RULE_OF, RUNS, SESSIONS, TURNS, Rule

SCRUB_ROWS = 500
"""A table whose keys reach at most this is compared whole every pass; a bigger one at least
this many keys a pass (`SCRUB_MARK`)."""

SCRUB_PASSES = 64
"""Every row of a big table is compared at least once every this many passes."""

KEY_MARK = "^"
"""Prefix of a state table's mark: the highest source key a pass read of it (rows above are
new)."""

SCRUB_MARK = "%"
"""Prefix of a state table's mark: where the window of keys compared in full stopped."""

OPEN_MARK = "+"
"""Prefix of a mark per run unfinished at the last pass (its source id follows)."""

FINISHED = ("completed", "failed")
"""The statuses of a run upstream no longer updates on its own (`finish_run`)."""


class CentralIds(dict[int, int]):
    """Source id → central id of one referenced table (runs, sessions, turns), read from the
    centre as they are asked for, never the whole map: a pass holds what it touches. What a
    pass wrote or read is kept (`compact`) as ranges of consecutive ids, a source id's range
    found by bisection: a new origin's rows, sent in key order with ids taken a batch at a
    time, are a range a batch, so the links of later rows (a run's steps) are remapped
    without reading back the ids the pass wrote, in memory that stays flat with the source's
    size while the ids run consecutively (24 bytes an entry where they do not)."""

    def __init__(self, load: Callable[[list[int]], Iterable[tuple[int, int]]]) -> None:
        super().__init__()
        self.load = load
        self.absent: set[int] = set()
        self.starts = array("q")
        """The first source id of each range, ascending."""
        self.ends = array("q")
        """The source id after each range's last."""
        self.dests = array("q")
        """The central id of each range's first source id."""

    def ranged(self, key: int) -> int | None:
        """The central id a range holds of `key`, or None."""
        at = bisect_right(self.starts, key) - 1
        if at >= 0 and key < self.ends[at]:
            return self.dests[at] + key - self.starts[at]
        return None

    def fetch(self, keys: Iterable[int]) -> None:
        """Read the central ids of `keys` not known yet, a chunk a statement."""
        missing = sorted(
            k for k in {int(k) for k in keys} - self.keys() - self.absent if self.ranged(k) is None
        )
        for part in chunks(missing):
            found = dict(self.load(part))
            self.update(found)
            self.absent.update(k for k in part if k not in found)

    def get(self, key: int, default: Any = None) -> Any:
        value = dict.get(self, key)
        if value is None and isinstance(key, int) and self.starts:
            value = self.ranged(key)
        if value is None and key not in self.absent and isinstance(key, int):
            self.fetch([key])
            value = dict.get(self, key)
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, int) and self.get(key) is not None

    def __getitem__(self, key: int) -> int:
        value = self.get(key)  # the ranges too, as `in` sees them
        if value is None:
            raise KeyError(key)
        return int(value)

    def __setitem__(self, key: int, value: int) -> None:
        self.absent.discard(key)
        dict.__setitem__(self, key, value)

    def compact(self) -> None:
        """Fold the ids held one by one into the ranges (a streamed pass's, after each
        batch): consecutive source ids with consecutive central ids make one range."""
        if not dict.__len__(self):
            return
        starts, ends, dests = array("q"), array("q"), array("q")
        kept: dict[int, int] = {}
        for key, dest in sorted(dict.items(self)):
            if self.starts and (held := self.ranged(key)) is not None:
                if held != dest:
                    kept[key] = dest  # set anew since: it stays one by one
                continue
            if starts and key == ends[-1] and dest == dests[-1] + key - starts[-1]:
                ends[-1] = key + 1
            else:
                starts.append(key)
                ends.append(key + 1)
                dests.append(dest)
        dict.clear(self)
        dict.update(self, kept)
        if not self.starts or (starts and starts[0] >= self.ends[-1]):
            if (
                starts
                and self.starts
                and starts[0] == self.ends[-1]
                and dests[0] == self.dests[-1] + starts[0] - self.starts[-1]
            ):
                self.ends[-1] = ends[0]
                starts, ends, dests = starts[1:], ends[1:], dests[1:]
            self.starts.extend(starts)
            self.ends.extend(ends)
            self.dests.extend(dests)
            return
        merged = sorted(
            [
                *zip(self.starts, self.ends, self.dests, strict=True),
                *zip(starts, ends, dests, strict=True),
            ]
        )
        self.starts = array("q", (r[0] for r in merged))
        self.ends = array("q", (r[1] for r in merged))
        self.dests = array("q", (r[2] for r in merged))

    def forget(self) -> None:
        """Drop every id read or set: they are read again as asked."""
        self.clear()
        self.absent.clear()
        self.starts, self.ends, self.dests = array("q"), array("q"), array("q")

    def known(self) -> Set[int]:
        """The source ids the centre maps, as a set whose membership is asked lazily."""
        return _Known(self)


class _Known(Set[int]):
    def __init__(self, ids: CentralIds) -> None:
        self.ids = ids

    def __contains__(self, key: object) -> bool:
        return key in self.ids

    def __iter__(self) -> Iterator[int]:
        ranged = [
            k for s, e in zip(self.ids.starts, self.ids.ends, strict=True) for k in range(s, e)
        ]
        return iter([*dict.keys(self.ids), *ranged])

    def __len__(self) -> int:
        spans = sum(e - s for s, e in zip(self.ids.starts, self.ids.ends, strict=True))
        return dict.__len__(self.ids) + spans

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)


def known(ids: dict[int, int]) -> Set[int]:
    """The source ids a referenced table's map holds (lazily for `CentralIds`)."""
    return ids.known() if isinstance(ids, CentralIds) else set(ids)


class ChangedRows(OriginState):
    """Reading only the rows of a big state table that may have changed (see the module)."""

    def _partial_ok(self, rule: Rule) -> bool:
        """Whether `rule`'s table may be read in part this pass."""
        if self.whole_read or self.fresh or self.adopt:
            return False
        # a table marked held whose held runs did not change is read in part, those runs'
        # rows left out; one held run changed: every table compared whole, as the hold needs
        held = HELD_MARK if not self.held_steady else None
        if self.hwm_loaded.get(STATE_MARK + rule.table) in (None, held):
            return False
        if self.hwm_loaded.get(STATE_MARK + RUNS) == held:
            return False
        if "status" not in self.have.get(RUNS, ()):
            return False
        if self.hwm_loaded.get(KEY_MARK + rule.table, 0) <= SCRUB_ROWS:
            return False
        if self._counts_agree(rule):
            return True
        if rule.table == RUNS:
            self.whole_read = True  # runs deleted take their rows in every table along
        return False

    def _counts_agree(self, rule: Rule) -> bool:
        """Whether no row at or below `rule`'s key mark can have been deleted since the
        last pass (see the module): the source holds as many there as the id map, and the
        row at the mark. Four counts, each on an index, whatever the table's size."""
        table = model_table(rule)
        key = self._key_column(rule, table)
        top = self.hwm_loaded.get(KEY_MARK + rule.table, 0)
        count = select(func.count()).select_from(table)

        def source(statement: Any) -> int:
            return int(self._raw(statement).fetchone()[0])

        held = self._held_keys(rule, table, key, top)
        below = source(count) - source(count.where(key > top)) - len(held)
        if source(count.where(key == top)) != 1:
            return False
        mapped = select(func.count()).where(
            IDS.c.origin_id == self.origin_id, IDS.c.tbl == rule.table, IDS.c.src_id <= top
        )
        if rule.table == RUNS:  # a run gone keeps its entry, without a hash, for its links
            mapped = mapped.where(IDS.c.hash.is_not(None))
        if len(held) <= CHUNK:  # a held run's rows sent before it was held are mapped
            mapped = mapped.where(IDS.c.src_id.not_in(held)) if held else mapped
            return below == int(self.central.execute(mapped).scalar_one())
        entries = int(self.central.execute(mapped).scalar_one())
        for part in chunks(held):
            entries -= int(self.central.execute(mapped.where(IDS.c.src_id.in_(part))).scalar_one())
        return below == entries

    def _held_keys(self, rule: Rule, table: Table, key: ColumnElement[Any], top: int) -> list[int]:
        """The source keys, at or below `top`, of `rule`'s rows this pass holds back (of the
        runs held before and unchanged since, `holding`): counted out of the source's rows,
        with their entries (if any) out of the id map's. Few: a held run's rows, and its
        sessions' turns, found on the indexes of their runs and sessions. The held sessions
        are known once asked (the turns of the held runs)."""
        if not self.held:
            return []
        if rule.table in self.held_rows:
            return self.held_rows[rule.table]
        if not self.held_sessions and TURNS in self.have:
            self.held_sessions = quarantine.held_sessions(self.src, self.have, self.held)
        runs, sessions = sorted(self.held), sorted(self.held_sessions)
        names = self.have[rule.table]
        wanted: list[ColumnElement[bool]] = []
        if rule.table == SESSIONS:
            wanted = [table.c.id.in_(sessions)] if sessions else []
        elif rule.table == RUNS:
            wanted = [table.c.id.in_(runs)]
        elif rule.table == TURNS and "session_id" in names:
            # a held run's turns are among its held sessions' (a turn has a session)
            wanted = [table.c.session_id.in_(sessions)] if sessions else []
        elif rule.run_column is not None and rule.run_column in names:
            wanted = [table.c[rule.run_column].in_(runs)]
        keys: set[int] = set()
        for condition in wanted:
            found = self._raw(select(key).select_from(table).where(key <= top, condition))
            keys.update(int(k) for (k,) in found.fetchall())
        self.held_rows[rule.table] = sorted(keys)
        return self.held_rows[rule.table]

    def _key_column(self, rule: Rule, table: Table) -> ColumnElement[Any]:
        if rule.key == "rowid":
            return literal_column("rowid")
        return table.c.run_id if rule.key == "run" else table.c.id

    def _live_runs(self) -> set[int]:
        """The source runs whose rows may have changed: unfinished at the last pass, new, or
        whose own row changed (known once the runs table is read)."""
        if self.live_runs is None:
            self.live_runs = {
                int(mark[len(OPEN_MARK) :])
                for mark in self.hwm_loaded
                if mark.startswith(OPEN_MARK)
            }
        return self.live_runs

    def _read_part(self, rule: Rule) -> tuple[list[str], list[Any], int]:
        """The rows of `rule`'s table that may have changed, in key order, with the id map
        entries of them (in `maps`), and the table's total: the one loaded when none differs
        from its entry (the table is then unchanged), else a new one."""
        table = model_table(rule)
        columns = source_columns(rule, self.have)
        key = self._key_column(rule, table)
        top = self.hwm_loaded.get(KEY_MARK + rule.table, 0)
        width = max(SCRUB_ROWS, top // SCRUB_PASSES + 1)
        low = self.hwm_loaded.get(SCRUB_MARK + rule.table, 0)
        if low >= top:
            low = 0
        high = low + width
        marks = self.pending[rule.table] = {SCRUB_MARK + rule.table: high}
        live = sorted(self._live_runs())
        sessions: list[int] = []
        if rule.table == SESSIONS and TURNS in self.have:
            sessions = self._sessions_of_new_turns()
        run_column = "id" if rule.table == RUNS else rule.run_column
        conditions: list[ColumnElement[bool]] = [key > top, and_(key > low, key <= high)]
        wanted: list[tuple[Any, list[int]]] = []
        if rule.table == SESSIONS:
            wanted.append((table.c.id, sessions))
        elif rule.table == RUNS or rule.key == "run":  # by the key's index
            wanted.append((key, live))
        # other tables' rows of live runs are found by their entries (`_entries_of`): the
        # centre indexes the run of a row, the source often does not
        base = source_select(rule, columns)
        rows: dict[int, Any] = {}
        names: list[str] = []
        at = 0

        def read(where: ColumnElement[bool]) -> None:
            nonlocal names, at
            cursor = self._raw(base.where(where))
            if not names:
                names = [d[0] for d in cursor.description]
                at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
            for row in cursor.fetchall():
                rows[int(row[at])] = row

        for condition in conditions:  # apart: each by the key's index
            read(condition)
        for column, values in wanted:
            for part in chunks(values):
                read(column.in_(part))
        # the rows of runs held back (unchanged since: `holding`) are neither sent nor gone
        held = set(self.held_rows.get(rule.table, ()))
        for k in held:
            rows.pop(k, None)
        entries = self._entries_of(rule, table, list(rows), low, high, live)
        for k in held:
            entries.pop(k, None)
        missing = sorted(set(entries) - set(rows))
        for part in chunks(missing):
            read(key.in_(part))
        if not names:  # nothing read: the names as a read gives them
            names = [c.name for c in base.selected_columns]
            at = names.index({"rowid": ROWID, "run": "run_id", "id": "id"}[rule.key])
        self.maps[rule.table] = entries
        self.partial.add(rule.table)
        ordered = [rows[k] for k in sorted(rows)]
        marks[KEY_MARK + rule.table] = max(top, *rows) if rows else top
        changed = [k for k in rows if (e := entries.get(k)) is None or e[2] != digest(rows[k])]
        gone = [k for k in entries if k not in rows]
        if rule.table == RUNS:
            self._note_live(names, ordered, changed)
        if run_column is not None and run_column in names:
            owner = names.index(run_column)
            self.suspects[rule.table] = {
                int(rows[k][owner]) for k in changed if isinstance(rows[k][owner], int)
            }
        else:
            self.suspects[rule.table] = None
        loaded = self.hwm_loaded[STATE_MARK + rule.table]
        if not changed and not gone:
            return names, [], loaded
        return names, ordered, digest([loaded, *sorted(changed), *sorted(gone)])

    def _note_live(self, names: list[str], rows: list[Any], changed: list[int]) -> None:
        """The runs unfinished as read now (their marks, for the next pass: every run open
        before was read, but one deleted since), and the runs whose rows this pass looks at
        in every table: those, and every run new or changed."""
        status = names.index("status")
        key = names.index("id")
        now = {int(r[key]) for r in rows if r[status] not in FINISHED}
        self.pending_open = now
        self.live_runs = self._live_runs() | now | set(changed)

    def _sessions_of_new_turns(self) -> list[int]:
        """The sessions whose row may have changed: those of turns above the turns' key
        high-water mark (upstream moves a session's head as it adds a turn)."""
        turns = model_table(RULE_OF[TURNS])
        top = self.hwm_loaded.get(KEY_MARK + TURNS, 0)
        cursor = self._raw(select(turns.c.session_id).where(turns.c.id > top).distinct())
        return sorted({int(s) for (s,) in cursor.fetchall() if isinstance(s, int)})

    def _entries_of(
        self, rule: Rule, table: Table, keys: list[int], low: int, high: int, live: list[int]
    ) -> dict[int, Entry]:
        """The id map entries of the keys read, of the window (`low`, `high`], and of the rows
        the centre holds of the live runs (a row of one deleted in the source is found so)."""
        entries: dict[int, Entry] = {}
        base = select(IDS.c.src_id, IDS.c.dest_id, IDS.c.dest_sub, IDS.c.hash).where(
            IDS.c.origin_id == self.origin_id, IDS.c.tbl == rule.table
        )

        def take(statement: Any) -> None:
            for src_id, dest_id, dest_sub, hashed in self.central.execute(statement):
                entries[int(src_id)] = [dest_id, dest_sub, hashed]

        take(base.where(IDS.c.src_id > low, IDS.c.src_id <= high))
        for part in chunks(sorted(set(keys))):
            take(base.where(IDS.c.src_id.in_(part)))
        if rule.table in (RUNS, SESSIONS) or not live:
            return entries
        if rule.key == "run":
            for part in chunks(live):
                take(base.where(IDS.c.src_id.in_(part)))
            return entries
        runs = self.ids[RUNS]
        if isinstance(runs, CentralIds):
            runs.fetch(live)
        central = sorted({c for r in live if (c := runs.get(r)) is not None})
        if not central:
            return entries
        if rule.key == "rowid":
            for part in chunks(central):
                take(base.where(IDS.c.dest_id.in_(part)))
            return entries
        column = rule.run_column
        if column is None or column not in table.c:
            return entries
        for part in chunks(central):
            rows = select(table.c.id).where(table.c[column].in_(part))
            take(base.where(IDS.c.dest_id.in_(rows.scalar_subquery())))
        return entries
