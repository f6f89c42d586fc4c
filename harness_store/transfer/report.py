"""What a copy reports, and the errors it raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CopyError as CopyError
from ..errors import CopyVerificationError as CopyVerificationError
from ..errors import TargetNotEmptyError as TargetNotEmptyError
from ..errors import UnknownTablesError as UnknownTablesError
from ..releases import NEWEST_KNOWN_RELEASE

DEFAULT_BATCH_SIZE = 1000
"""Rows read and inserted per batch unless told otherwise."""

Progress = Callable[[str, int, int], None]
"""`progress(table_name, rows_done, rows_total)`, called as a copy advances."""


@dataclass(frozen=True)
class CopyReport:
    """What `copy_store` copied, verified and left out."""

    source: str
    """The source as a URL, password hidden."""
    target: str
    """The target as a URL, password hidden."""
    counts: dict[str, int] = field(hash=False)
    """Rows per 0.13 table, in copy order; verified equal on both sides."""
    skipped_tables: dict[str, int] = field(default_factory=dict, hash=False)
    """Tables of a newer io-harness in the source, with their row counts: not copied."""
    skipped_columns: tuple[str, ...] = ()
    """`table.column`s of a newer io-harness on 0.13 tables in the source: not copied."""
    checkpoint_format: int = 0
    """The checkpoint-format marker (`user_version`) copied from the source."""
    batch_size: int = DEFAULT_BATCH_SIZE
    seconds: float = 0.0
    """Wall-clock time of the whole copy."""
    origin: str | None = None
    """The origin UUID under which the target knows the SQLite source (`sync.adopt_copy`), so
    that a sync of the source into the target sends only what changed since the copy; None
    when the source is no store sync takes (a PostgreSQL one, one of a newer io-harness)."""

    @property
    def rows(self) -> int:
        """Rows copied in all."""
        return sum(self.counts.values())

    def describe(self) -> list[str]:
        """Lines for a person: what was copied, and what was left out."""
        lines = [
            f"copied {self.rows} rows in {len(self.counts)} tables from {self.source} "
            f"to {self.target} in {self.seconds:.1f} s; row counts verified on both sides",
        ]
        lines += [f"  {name}: {count}" for name, count in self.counts.items()]
        if self.origin is not None:
            lines.append(
                f"the target knows the source as sync origin {self.origin}: a sync of it sends "
                "only what changed since this copy"
            )
        if self.skipped_tables:
            shown = ", ".join(f"{name} ({n} rows)" for name, n in self.skipped_tables.items())
            lines.append(
                f"not copied (tables of an io-harness newer than {NEWEST_KNOWN_RELEASE}): " + shown
            )
        if self.skipped_columns:
            lines.append(
                f"not copied (columns of an io-harness newer than {NEWEST_KNOWN_RELEASE}): "
                + ", ".join(self.skipped_columns)
            )
        return lines
