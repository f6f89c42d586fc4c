"""What a follower says: a line per pass that sent something, notices, and its summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from .report import HeldRun, TableCounts

NoticeKind = Literal["waiting", "deleted", "refused", "retrying", "resumed", "stopping"]


@dataclass(frozen=True)
class FollowPass:
    """One pass over one source: its changes sent to the centre in one transaction."""

    source: str
    origin: str
    counts: TableCounts
    seconds: float
    """How long the pass took, from opening the source to the central commit."""
    delay: float
    """Seconds from the newest commit the follower saw in the source when the pass began (or
    from the follower's start, for what was committed before) to the central commit (the
    file's modification time against the clock: 0 or more)."""
    reread: str | None = None
    """Why the source was read again in full (its history went back), or None."""
    warnings: tuple[str, ...] = ()
    quarantined: tuple[HeldRun, ...] = ()
    """The runs this pass was the first to hold in quarantine (each named by one pass)."""
    released: tuple[int, ...] = ()
    """Source runs held before that this pass sent whole."""

    @property
    def rows(self) -> int:
        """Rows written centrally (inserted, updated or deleted)."""
        return self.counts.rows

    def describe(self) -> str:
        """One line for a person."""
        c = self.counts
        what = (
            f"{sum(c.inserted.values())} new, {sum(c.updated.values())} changed, "
            f"{sum(c.deleted.values())} deleted"
        )
        tail = f" (read again in full: {self.reread})" if self.reread else ""
        tail += "".join(f"; {q.describe()}" for q in self.quarantined)
        tail += "".join(f"; released run {r} from quarantine: sent whole" for r in self.released)
        return f"{self.source}: {self.rows} rows ({what}), delay {self.delay:.2f} s{tail}"

    def as_json(self) -> dict[str, object]:
        """The pass as one JSON object (a line of `--json`)."""
        return {
            "event": "pass",
            "source": self.source,
            "origin": self.origin,
            "rows": self.rows,
            "inserted": _nonzero(self.counts.inserted),
            "updated": _nonzero(self.counts.updated),
            "deleted": _nonzero(self.counts.deleted),
            "delay": round(self.delay, 4),
            "seconds": round(self.seconds, 4),
            "reread": self.reread,
            "warnings": list(self.warnings),
            "quarantined": [q.as_json() for q in self.quarantined],
            "released": list(self.released),
        }


def _nonzero(counts: Counter[str]) -> dict[str, int]:
    return {name: n for name, n in counts.items() if n}


@dataclass(frozen=True)
class FollowNotice:
    """Something a person should know, said once (not once per poll): a source not there
    yet or deleted, a source refused until it changes, the centre unreachable (retrying) and
    back again."""

    kind: NoticeKind
    source: str | None
    """The source it is about, or None for the centre."""
    message: str

    def describe(self) -> str:
        """One line for a person."""
        return f"{self.source}: {self.message}" if self.source else self.message

    def as_json(self) -> dict[str, object]:
        """The notice as one JSON object (a line of `--json`)."""
        return {"event": self.kind, "source": self.source, "message": self.message}


FollowEvent = FollowPass | FollowNotice
OnEvent = Callable[[FollowEvent], None]
"""`on_event(event)`: called from the follower's threads (one at a time) for every pass,
including those that found nothing to send, and every notice."""


@dataclass
class FollowReport:
    """Everything a follower did, from its start to its stop."""

    dest: str
    seconds: float = 0.0
    passes: int = 0
    """Passes made, including those that found nothing new."""
    rows: dict[str, int] = field(default_factory=dict)
    """Rows written centrally, per source."""
    delays: list[float] = field(default_factory=list)
    """The delay of every pass that sent something."""
    retries: int = 0
    """Passes that failed on a transient error and were made again."""

    def add(self, done: FollowPass) -> None:
        """Count one pass."""
        self.passes += 1
        self.rows[done.source] = self.rows.get(done.source, 0) + done.rows
        if done.rows:
            self.delays.append(done.delay)

    @property
    def total(self) -> int:
        """Rows written centrally in all."""
        return sum(self.rows.values())

    def describe(self) -> str:
        """The summary line."""
        worst = f", worst delay {max(self.delays):.2f} s" if self.delays else ""
        return (
            f"followed {len(self.rows)} store{'s' * (len(self.rows) != 1)} into {self.dest} "
            f"for {self.seconds:.0f} s: "
            f"{self.total} rows in {len(self.delays)} passes{worst}"
            + (f"; {self.retries} passes retried" if self.retries else "")
        )

    def as_json(self) -> dict[str, object]:
        """The summary as one JSON object (the last line of `--json`)."""
        return {
            "event": "summary",
            "dest": self.dest,
            "seconds": round(self.seconds, 3),
            "passes": self.passes,
            "sent": len(self.delays),
            "rows": self.total,
            "per_source": dict(self.rows),
            "worst_delay": round(max(self.delays), 4) if self.delays else None,
            "retries": self.retries,
        }
