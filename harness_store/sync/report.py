"""What a sync did, per origin and in all."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..errors import DuplicateOriginError as DuplicateOriginError
from ..errors import StoreError
from ..errors import SyncRefusedError as SyncRefusedError

Progress = Callable[[str, int, int, int], None]
"""`progress(source, sources_done, sources_total, rows_sent)`: called when a source starts
(`rows_sent` 0), as its rows go (after each batch) and when it is done."""


@dataclass(frozen=True)
class HeldRun:
    """A run one pass held back: its id in the source, the first value found (table, row,
    column; None for a run that only waits for another) and what is wrong, and whether this
    pass is the first to hold it."""

    run: int
    table: str
    row: str | None
    column: str | None
    problem: str
    new: bool

    def describe(self) -> str:
        """One line for a person."""
        where = f"{self.table}.{self.column} of the row {self.row} " if self.column else ""
        return f"quarantined run {self.run}: {where}{self.problem}"

    def as_json(self) -> dict[str, object]:
        """The held run as a JSON object."""
        return {
            "run": self.run,
            "table": self.table,
            "row": self.row,
            "column": self.column,
            "problem": self.problem,
        }


@dataclass
class TableCounts:
    """Rows inserted, updated and deleted centrally, and rows left out, per table."""

    inserted: Counter[str] = field(default_factory=Counter)
    updated: Counter[str] = field(default_factory=Counter)
    deleted: Counter[str] = field(default_factory=Counter)
    orphans: Counter[str] = field(default_factory=Counter)
    """Rows not sent because a link they must have names a row the source lacks (e.g. a step
    of a run that is not there, written with foreign keys off)."""

    @property
    def rows(self) -> int:
        """Rows written centrally (inserted, updated or deleted)."""
        return sum(self.inserted.values()) + sum(self.updated.values()) + sum(self.deleted.values())

    def all(self) -> tuple[Counter[str], ...]:
        """The four counters, in field order."""
        return self.inserted, self.updated, self.deleted, self.orphans


@dataclass(frozen=True)
class OriginReport:
    """One source's part of a sync."""

    source: str
    origin: str
    """The origin's UUID."""
    new_origin: bool
    marked: bool
    counts: TableCounts
    seconds: float
    committed: bool
    """False for a dry run: the counts are what a sync would have written."""
    reread: str | None = None
    """Why this origin was read again in full (its history went backwards: a restored backup),
    or None."""
    warnings: tuple[str, ...] = ()
    """What a person should know and check (e.g. a copy of a marked store synced before)."""
    uncovered: bool = False
    """Whether this sync deleted a memory entry that may have shadowed another origin's (that
    origin's entry comes back at its next sync)."""
    quarantined: tuple[HeldRun, ...] = ()
    """The runs of this source the centre holds in quarantine after this sync (a value it
    cannot hold as it is, or waiting for such a run): none of their rows was written."""
    released: tuple[int, ...] = ()
    """Source runs held in quarantine before that this sync sent whole (repaired)."""

    def describe(self) -> str:
        """One line for a person."""
        c = self.counts
        what = (
            f"{sum(c.inserted.values())} new, {sum(c.updated.values())} changed, "
            f"{sum(c.deleted.values())} deleted rows"
        )
        if not c.rows:
            what = "nothing new"
        orphans = sum(c.orphans.values())
        tail = f"; {orphans} orphan rows left out" if orphans else ""
        label = " (new origin)" if self.new_origin else ""
        if self.reread:
            label += f" (read again in full: {self.reread})"
        return f"{self.source} → origin {self.origin}{label}: {what}{tail} ({self.seconds:.2f} s)"


@dataclass(frozen=True)
class RefusedSource:
    """A source a sync did not send anything of, and why."""

    source: str
    error: StoreError


@dataclass(frozen=True)
class SyncReport:
    """Everything one `sync` call did."""

    dest: str
    origins: tuple[OriginReport, ...]
    seconds: float
    dry_run: bool = False
    refused: tuple[RefusedSource, ...] = ()
    """Sources left out (damaged, of a newer io-harness, …): `sync` raises `SyncRefusedError`
    carrying this report when there are any."""
    dest_setup: str | None = None
    """What the sync would first have done to the destination had it not been a dry run
    (create it, upgrade it to head, add sync's tables), said for a person; None when it
    was ready, and always None for a sync that was made (a dry run writes nothing)."""

    @property
    def rows(self) -> int:
        """Rows written centrally in all."""
        return sum(o.counts.rows for o in self.origins)

    def describe(self) -> list[str]:
        """Lines for a person."""
        head = "would sync" if self.dry_run else "synced"
        stores, rows = len(self.origins), self.rows
        lines = [
            f"{head} {stores} store{'s' * (stores != 1)} into {self.dest}: "
            f"{rows} row{'s' * (rows != 1)} in {self.seconds:.1f} s"
            + (" (dry run: nothing written)" if self.dry_run else "")
        ]
        if self.dest_setup is not None:
            lines.append(f"  {self.dest_setup}")
        for o in self.origins:
            lines.append("  " + o.describe())
            lines += [f"    {q.describe()}" for q in o.quarantined]
            lines += [f"    released run {r} from quarantine: sent whole" for r in o.released]
        lines += [f"  {r.source}: refused: {r.error}" for r in self.refused]
        return lines


def merged(
    first: list[OriginReport | RefusedSource], again: list[OriginReport | RefusedSource]
) -> list[OriginReport | RefusedSource]:
    """The reports of two passes over the same sources as one per source."""
    later = iter(again)
    together: list[OriginReport | RefusedSource] = []
    for result in first:
        if not isinstance(result, OriginReport):
            together.append(result)
            continue
        second = next(later)
        if not isinstance(second, OriginReport):
            together.append(second)
            continue
        counts = result.counts
        for mine, theirs in zip(counts.all(), second.counts.all(), strict=True):
            mine.update(theirs)
        together.append(
            replace(
                result,
                seconds=result.seconds + second.seconds,
                warnings=result.warnings + second.warnings,
                quarantined=second.quarantined,
                released=result.released + second.released,
            )
        )
    return together
