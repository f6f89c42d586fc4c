"""What `Store.check` found in a store, and what `Store.repair` did about it.

A `Finding` names one problem: its kind, the table, the rows (by the column `key` names) and
what io-harness would do with them. A problem `repair` can fix without losing data says how
(`repair`); one whose fix deletes rows says which statement would delete them (`command`) and
is never fixed by `repair`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path


class FindingKind(Enum):
    """The kinds of problem `check` looks for, grouped as the checks run."""

    INTEGRITY = "integrity"
    """SQLite's `integrity_check` reported the file damaged."""
    FOREIGN_KEY = "foreign_key"
    """SQLite's `foreign_key_check` found a row whose parent is missing (not a run table's)."""
    STAMP = "stamp"
    """`alembic_version` disagrees with the shape of the store."""
    MISSING_TABLE = "missing_table"
    MISSING_COLUMN = "missing_column"
    UNKNOWN_TABLE = "unknown_table"
    UNKNOWN_COLUMN = "unknown_column"
    MISSING_INDEX = "missing_index"
    INDEX_DIFFERS = "index_differs"
    """An index of the right name on other columns than the models'."""
    UNKNOWN_INDEX = "unknown_index"
    DUPLICATE_ROWS = "duplicate_rows"
    """A missing UNIQUE index whose table holds rows it would refuse (never re-created by
    `repair`: it would fail)."""
    UNKNOWN_VIEW = "unknown_view"
    MISSING_TRIGGER = "missing_trigger"
    TRIGGER_DIFFERS = "trigger_differs"
    """One of harness_store's triggers whose definition (SQLite: its text; PostgreSQL: the
    function it runs) is not what the package creates."""
    UNKNOWN_TRIGGER = "unknown_trigger"
    STEP_WITHOUT_CHECKPOINT = "step_without_checkpoint"
    """A step number of a checkpointed run with a `steps` row but no checkpoint event."""
    CHECKPOINT_WITHOUT_STEP = "checkpoint_without_step"
    """A checkpoint event for a step number that has no `steps` row."""
    STEP_GAP = "step_gap"
    """Step numbers missing between 1 and a run's last step."""
    ORPHAN = "orphan"
    """Rows keyed to a run that does not exist."""
    MISSING_PARENT = "missing_parent"
    """A run whose `parent_run_id` names a run that does not exist."""
    SPAWN_CYCLE = "spawn_cycle"
    """Runs whose `parent_run_id`s lead back to themselves."""
    LEASE_OF_MISSING_RUN = "lease_of_missing_run"
    WRONG_TYPE = "wrong_type"
    """A value of another type than its column's (on SQLite: text, a BLOB, Infinity, a
    fraction or a number past 64 bits in an INTEGER column; a BLOB or a number in a TEXT
    one)."""
    NOT_UTF8 = "not_utf8"
    """Text whose bytes are not UTF-8 (SQLite keeps whatever bytes a writer hands it)."""
    NUL_IN_TEXT = "nul_in_text"
    """Text holding a NUL character, which the Store refuses and PostgreSQL cannot hold."""
    NOT_JSON = "not_json"
    """A JSON document io-harness parses (a run's policy, an assistant turn's calls, an event
    of the stream) holding NaN or Infinity, which RFC 8259 and io-harness's reader refuse."""
    LEASE_EXPIRY = "lease_expiry"
    """A lease whose expiry (`renewed_at + ttl_secs`) no stamp can hold (a negative ttl, or
    one past the year 9999), or whose generation no take-over can raise (2⁶³−1)."""
    BAD_TIME = "bad_time"
    """A value of a time-stamp column (`at`, `…_at`) that is no time stamp io-harness
    writes."""
    SPEND_COUNTER = "spend_counter"
    """A kept spend answer, still marked current by its counter, that disagrees with the
    calls in `provider_calls`."""
    RUN_TOKENS = "run_tokens"
    """A run's token total kept in `hs_run_tokens` (hs6, which the Store's step door reads)
    that disagrees with the sum of its steps' tokens, or a run with no such row."""
    UNGUARDED_TABLE = "unguarded_table"
    """On a PostgreSQL centre with roles: a table a follower role may write without
    row-level security or one of its policies (`harness-store roles` puts them back)."""
    QUARANTINED = "quarantined"
    """A run a sync holds in the centre's quarantine (`hs_sync_quarantine`): one of its rows
    holds a value the centre cannot hold as it is (or it waits for such a run); it is sent
    whole once its source is repaired."""


@dataclass(frozen=True)
class Finding:
    """One problem in a store."""

    kind: FindingKind
    table: str
    detail: str
    """What is wrong, in a sentence."""
    upstream: str
    """What io-harness does with these rows (or this schema) as they are."""
    key: str = ""
    """The column `rows` are values of ("id", "run_id", "name" …); empty when no rows."""
    rows: tuple[int | str, ...] = ()
    """The rows concerned (at most `ROWS_SHOWN` of them; `count` says how many in all)."""
    count: int = 0
    """How many rows in all (0 for a schema finding)."""
    repair: str | None = None
    """What `repair` does about it, when that loses nothing; None when it does not touch it."""
    command: str | None = None
    """The statement that would remove the rows, when removing them loses data."""

    @property
    def repairable(self) -> bool:
        """Whether `repair` fixes this finding."""
        return self.repair is not None


ROWS_SHOWN = 50
"""The most row keys one finding lists (its `count` says how many there are)."""


@dataclass(frozen=True)
class CheckReport:
    """Everything `Store.check` found, and what it looked at."""

    findings: tuple[Finding, ...]
    revision: str | None
    """The revision in `alembic_version` (None: an untracked io-harness store)."""
    release: str | None
    """The io-harness release whose shape the store was checked against."""
    checks: tuple[str, ...] = field(default=())
    """The names of the checks that ran (those a store's backend or release lacks are
    skipped: `integrity` on PostgreSQL, `resume` before 0.7, `spend` before hs3)."""

    @property
    def healthy(self) -> bool:
        """Whether nothing was found."""
        return not self.findings

    def of(self, kind: FindingKind) -> tuple[Finding, ...]:
        """The findings of one kind."""
        return tuple(f for f in self.findings if f.kind is kind)


@dataclass(frozen=True)
class Repaired:
    """What `Store.repair` did: the fixes, in order, and the check after them."""

    done: tuple[str, ...]
    """One line per fix made, in order (empty when nothing was safe to fix)."""
    backup: Path | None
    """The copy of the SQLite file taken before the first fix (None: nothing was fixed, or
    a PostgreSQL store, which has no file to copy)."""
    after: CheckReport
    """`check()` once the fixes were committed: what is left (data-losing findings)."""
