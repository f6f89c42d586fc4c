"""What one origin's sync knows while it runs: its id maps, marks and counts, and the helpers
every part of it shares (`apply.OriginSync` runs it; `state_tables` and `append_tables` send
the two kinds of table)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

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
    select,
)

from ..dialects import backend_named
from ..models.sync import ORIGINS
from .report import TableCounts
from .rules import RUNS, SESSIONS, TURNS, Rule

Entry = list[Any]
"""An id-map entry: `[dest_id, dest_sub, hash]`."""

BATCH = 5000

SLICE = 250
"""At most this many rows (or `batch_size`, if fewer) a slice writes into a SQLite centre: a
few tens of milliseconds of a live writer's wait."""

ROUND_TRIP_ROWS = 20
"""What a row written with statements of its own (a memory entry: a look, a delete, an
insert) counts for in a slice, against a row of a batched statement."""

STATE_MARK = "#"
"""Prefix of a state table's mark: the hash of all its rows (in key order) when last synced."""

ANCHOR_MARK = "@"
"""Prefix of an append table's mark: the hash of the facts (integers and stamps) of the row at
its high-water mark, which tells a source whose history went back (a restored backup) from one
that only grew."""

TEXT_MARK = "~"
"""Prefix of an append table's mark: how many of its text values up to the high-water mark
were non-empty, which tells that rows already sent were cleared (an archived session)."""

PAGES_MARK = "!pages"
"""The mark of the time (Unix seconds) a pass of the origin last checked its source's pages."""

PAGE_CHECK_EVERY = 300.0
"""Seconds between `PRAGMA quick_check`s of a source whose passes only bring what changed
(`apply.OriginSync._pages_due`): the check reads the whole file, which a pass of one new run
must not each time. A damaged page a pass reads fails that read whatever this says."""

CHUNK = 500
"""Ids per `IN (…)` list."""

UNSETTLED = 0
"""The hash an id map is saved with, in a slice committed before its row is settled (a link
to a row a later slice sends, a run whose rows are sent again later): no row hashes to it
(but by a 2⁻⁶⁴ chance, which costs an update), so a sync killed before the row settles
finds it changed and sends it again."""


HELD_MARK = 0
"""The mark a state table is saved with when a pass held back some of its rows (of runs in
quarantine): no table hashes to it (but by a 2⁻⁶⁴ chance), so the next pass compares its
rows again, and sends the held ones once their runs are released."""


class Overtaken(Exception):
    """A pass written in slices found, beginning a slice, that another pass of its origin
    registered since it began (and reads what this one committed so far): it stops, and the
    other sends the rest."""


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


class SliceControl(Protocol):
    """The destination transactions of a pass written in slices (`slices.Slices`)."""

    def open_slice(self) -> Connection:
        """End what is open (a read snapshot) and begin a write transaction."""
        ...

    def commit(self) -> None:
        """Commit the write transaction open."""
        ...

    def read(self) -> Connection:
        """Commit what is open and begin a read snapshot."""
        ...


class OriginState:
    """One origin's sync in progress: the source snapshot and destination connections, the
    id maps and marks as loaded and as changed so far, and the counts."""

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
        self.src, self.origin_id, self.have = src, origin_id, have
        self._dst: Connection | None = dst
        self.backend = backend_named(dst.dialect.name)
        self.counts, self.on_rows, self.batch_size = counts, on_rows, batch_size
        self.maps: dict[str, dict[int, Entry]] = {}
        self.ids: dict[str, dict[int, int]] = {RUNS: {}, SESSIONS: {}, TURNS: {}}
        self.hwm: dict[str, int] = {}
        self.hwm_loaded: dict[str, int] = {}
        self.tops: dict[str, int] = {}
        self.fixups: list[tuple[Rule, tuple[int, int | None], str, str, int, int]] = []
        """Links to set once their row is sent: (rule, central key, column, table linked,
        source id linked, source key of the row)."""
        self.waiting: Counter[tuple[str, int]] = Counter()
        """How many links of each row (table, source key) wait for their row."""
        self.reloading: dict[int, Any] = {}
        """Runs whose append rows are sent again this pass (their goal changed), with the
        goal's hash their map holds until then."""
        self.reload_runs: set[int] = set()
        self.gone_runs: dict[int, int] = {}
        self.map_new: list[dict[str, Any]] = []
        self.map_changed: list[dict[str, Any]] = []
        self.map_gone: list[dict[str, Any]] = []
        self.reread: str | None = None
        """Why the origin was read again in full (its history went backwards), or None."""
        self.uncovered = False
        """Whether a memory entry that may shadow another origin's was deleted centrally."""
        self.syncs = 0
        """The origin's sync count with this pass's (read only for a pass written in slices,
        which stops when another pass of its origin registers meanwhile: `Overtaken`)."""
        self.adopt = False
        """Whether the snapshot's rows are in the destination already, under their own ids (a
        copy's): nothing is written but the id maps and marks a sync of it would leave."""
        self.slices: SliceControl | None = None
        """The destination's transactions when the pass is written in slices (a SQLite
        centre, whose writers wait for each transaction); None: one transaction, `dst`."""
        self.reader: Connection | None = None
        """A read snapshot of the destination the id maps and marks are read in before the
        first slice begins (a sliced pass: they are read without holding the writers' turn)."""
        self.in_slice = 0
        """Rows written in the current slice."""
        self.slice_rows = min(batch_size, SLICE)
        """The rows of a slice (when the pass is written in slices)."""
        self.hwm_saved: dict[str, int] = {}
        """The marks as the destination holds them (loaded or saved by a slice)."""
        self.gone_changes: list[dict[str, Any]] = []
        """The id-map changes of runs deleted in the source, saved with their deletion."""
        self.held: set[int] = set()
        """Source runs this pass holds back (`quarantine`): none of their rows is written."""
        self.held_sessions: set[int] = set()
        """Source sessions a held run is a turn of: they wait, with all their turns."""
        self.held_steady = False
        """Whether no run held back before changed since (`holding`)."""
        self.held_rows: dict[str, list[int]] = {}
        """Per state table read in part, the source keys (at or below its key mark) of the
        rows of runs held back before and unchanged since (`finding`): left out of the read."""
        self.released: list[int] = []
        """Source runs held back before that this pass sends whole."""
        self.quarantined: list[Any] = []
        """What this pass held back (`quarantine.HeldRun`s)."""
        self.unreadable: dict[int, tuple[str, str | None, str | None, str]] = {}
        """Runs holding a text whose bytes are not UTF-8, each with its first such text
        (table, row, column, what is wrong): held back, the source read leniently."""
        self.flushed_unsettled: set[tuple[str, int]] = set()
        self.shed_kept = 0
        """The entries `_shed` kept the last time it walked the maps."""
        """Unsettled rows a committed slice saved as `UNSETTLED`: their true map is saved
        once they settle."""
        self.whole_read = False
        """Whether this pass reads every state table whole (a new origin, one read again)."""
        self.partial: set[str] = set()
        """State tables read in part (`finding`) or merged as streamed (`streamed`): their
        map in `maps` holds the entries of the rows read, never the whole map."""
        self.suspects: dict[str, set[int] | None] = {}
        """Per table read in part, the runs of its rows new or changed (None: of no run):
        where a value the centre cannot hold may be."""
        self.old_changed = False
        """Whether a row sent before changed or went (not only new rows came)."""
        self.pending: dict[str, dict[str, int]] = {}
        """Per state table, the marks its read found, set once its rows are sent."""
        self.pending_open: set[int] | None = None
        """The runs unfinished as the runs table was read, marked once it is sent."""
        self.finished: dict[str, int] = {}
        """The marks of the state tables sent, set at the pass's last save."""
        self.finished_open: set[int] | None = None
        """The runs unfinished as read, marked at the pass's last save."""
        self.streaming = False
        """Whether this pass streams a new origin's state tables (`state_tables.
        StateTables._stream_state`), holding no entry of a row once its map is written."""
        self.live_runs: set[int] | None = None
        """The runs whose rows a table read in part looks at (`finding.ChangedRows`)."""
        self.streamed: set[str] = set()
        """Big state tables read whole: hashed as read, then merged with their id map in key
        order a batch at a time (`whole_compare.WholeCompare`), never held."""

    def _shed(self) -> None:
        """Let go of what a pass streaming a new origin (`streaming`) knows of the rows it
        sent: their id maps are written (now, in a pass of one transaction; by the slice
        that commits them, in a sliced one) and the entries it keeps of them dropped, but
        those of rows whose links wait for a row not sent yet. The central ids the pass
        wrote or read are kept compact (`finding.CentralIds.compact`), for the links of
        later rows."""
        if not self.streaming:
            return
        if self.slices is None and self.map_new:
            self._write_new_maps()
        if self.map_new or self.map_changed:
            return
        for ids in self.ids.values():
            compact = getattr(ids, "compact", None)
            if compact is not None:
                compact()
        # The entries kept are those of rows whose links wait, which may stay until the pass
        # ends: walked again only once the maps have doubled since, so each entry is looked
        # at a bounded number of times however many batches the pass has.
        held = sum(len(entries) for entries in self.maps.values())
        if held < 2 * self.shed_kept + self.batch_size:
            return
        for tbl, entries in self.maps.items():
            keep = {k: e for k, e in entries.items() if self._unsettled((tbl, k))}
            if len(keep) != len(entries):
                self.maps[tbl] = keep
        self.shed_kept = sum(len(entries) for entries in self.maps.values())

    def _write_new_maps(self) -> None:
        raise NotImplementedError  # `id_maps.IdMaps`

    def _central_ids(self, tbl: str, keys: list[int]) -> list[tuple[int, int]]:
        raise NotImplementedError  # `apply.OriginSync`

    def _unsettled(self, key: tuple[str, int]) -> bool:
        raise NotImplementedError  # `id_maps.IdMaps`

    def _slice_done(self, rows: int) -> None:
        """Count `rows` written in the current slice; a full slice is committed (with its
        maps and marks) and the next one begun (`_end_slice`)."""
        self.in_slice += rows
        if self.slices is not None and self.in_slice >= self.slice_rows:
            self._end_slice()

    def _end_slice(self) -> None:
        raise NotImplementedError  # `late_links.LateLinks`

    @property
    def dst(self) -> Connection:
        """The destination transaction rows are written in; in a sliced pass the next slice
        is begun here, at its first statement, so what the pass computes between slices
        (and before the first) holds no writers' turn."""
        if self._dst is None:
            assert self.slices is not None
            self.reader = None
            self._dst = self.slices.open_slice()
            if self._syncs() != self.syncs:  # another pass of this origin began meanwhile
                raise Overtaken
        return self._dst

    @property
    def central(self) -> Connection:
        """Where the id maps and marks are read: the read snapshot, until the first slice."""
        return self.reader if self.reader is not None else self.dst

    def _syncs(self) -> int:
        """The origin's sync count, this pass's included (its row is locked while its
        transaction lasts: exact)."""
        return int(
            self.central.execute(
                select(ORIGINS.c.syncs).where(ORIGINS.c.id == self.origin_id)
            ).scalar_one()
        )

    def _sent(self, rows: int) -> None:
        if self.on_rows is not None and rows:
            self.on_rows(rows)

    def _raw_sql(self, sql: str) -> Any:
        """Run a SELECT given as SQL text without parameters on the source's own driver
        connection (as `_raw`), compiled once for every pass."""
        return backend_named(self.src.dialect.name).driver_text(self.src, sql)

    def _raw(self, statement: Any) -> Any:
        """Run a SELECT on the source's own driver connection (inside the snapshot's
        transaction): the rows of the bulk path come as plain tuples, without the per-row
        work of a SQLAlchemy result."""
        return backend_named(self.src.dialect.name).driver_rows(self.src, statement)

    def _dest_where(self, rule: Rule, table: Table) -> ColumnElement[bool]:
        """The WHERE that finds a central row from bound `k` (and `k2`, the step)."""
        if rule.key == "rowid":
            return and_(table.c.run_id == bindparam("k"), table.c.step == bindparam("k2"))
        column = table.c.run_id if rule.key == "run" else table.c.id
        return column == bindparam("k")
