"""What a sync did, per origin and in all."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

Progress = Callable[[str, int, int, int], None]
"""`progress(source, sources_done, sources_total, rows_sent)`: called when a source starts
(`rows_sent` 0), as its rows go (after each batch) and when it is done."""


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
        return f"{self.source} → origin {self.origin}{label}: {what}{tail} ({self.seconds:.2f} s)"


@dataclass(frozen=True)
class SyncReport:
    """Everything one `sync` call did."""

    dest: str
    origins: tuple[OriginReport, ...]
    seconds: float
    dry_run: bool = False

    @property
    def rows(self) -> int:
        """Rows written centrally in all."""
        return sum(o.counts.rows for o in self.origins)

    def describe(self) -> list[str]:
        """Lines for a person."""
        head = "would sync" if self.dry_run else "synced"
        lines = [
            f"{head} {len(self.origins)} stores into {self.dest}: {self.rows} rows "
            f"in {self.seconds:.1f} s" + (" (dry run: nothing written)" if self.dry_run else "")
        ]
        lines += ["  " + o.describe() for o in self.origins]
        return lines
