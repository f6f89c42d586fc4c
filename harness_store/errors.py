"""Typed errors. Every failure a caller can act on has its own class under `StoreError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sync.report import SyncReport


class StoreError(Exception):
    """Base of every error harness_store raises on purpose."""


class ResumeError(StoreError):
    """A run cannot be resumed: newer checkpoint format, unknown run, unreadable ledger or policy.

    The Python face of upstream's `Error::Resume`.
    """


class InvalidValueError(StoreError, ValueError):
    """A value cannot be stored in upstream's format (e.g. a negative step, tokens ≥ 2⁶³).

    Raised before anything is written, so the store is unchanged.
    """


class SchemaError(StoreError):
    """The database is not something harness_store will open or upgrade; nothing was changed."""


class NotADatabaseError(SchemaError):
    """The path is not a usable SQLite database: not SQLite, truncated, a directory, empty of
    meaning."""


class ForeignDatabaseError(SchemaError):
    """A database of some other application: it has tables, and they are not an io-harness store."""


class NewerFormatError(SchemaError):
    """The store's checkpoint format (`user_version`) is newer than this package understands."""


class UpgradeRequiredError(SchemaError):
    """The store is older than the schema this package writes, and upgrading was not allowed."""


class OfflineUpgradeError(SchemaError):
    """No offline (`--sql`) script can be rendered for this store (one torn between two
    releases: no fixed script knows which of its statements ran); it must be upgraded online."""


class InvalidTargetError(StoreError, ValueError):
    """A store URL that does not parse (a port that is no number, a URL SQLAlchemy cannot
    read): nothing was opened or created. The message never repeats the URL, which may hold a
    password."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """No store exists at the path, and creating one was not allowed."""


class StoreLockedError(StoreError):
    """Another connection held the write lock for longer than the busy timeout."""


class StoreAccessError(StoreError, PermissionError):
    """The store cannot be written: a read-only file or directory."""


class RunNotFoundError(StoreError, LookupError):
    """A read that upstream answers only for an existing run was asked about a missing one."""


class MalformedStoreError(NotADatabaseError):
    """The file is a SQLite database whose pages are damaged (`PRAGMA quick_check` failed):
    it cannot be upgraded, and no backup of it was written."""


class UnfinishedTransactionError(StoreError):
    """The store has an unfinished transaction (a hot rollback journal left by a process killed
    mid-write) that a read-only open cannot roll back; `harness-store upgrade` or any write
    open recovers it. Nothing was changed."""


class UpgradeFailedError(StoreError):
    """An upgrade failed at a named stage (`stage`: "backup", "upgrade", …), typically because
    the disk is full; `unchanged` says whether the store was left exactly as it was."""

    def __init__(self, message: str, *, stage: str, unchanged: bool) -> None:
        super().__init__(message)
        self.stage = stage
        self.unchanged = unchanged


def install_hint(extra: str) -> str:
    """How to install one of the package's extras, as it installs from a clone of its
    repository (the package is not on PyPI, so `pip install 'harness_store[…]'` fails)."""
    return f'pip install ".[{extra}]" (from a clone of harness_store)'


class MissingDriverError(StoreError, ModuleNotFoundError):
    """The store's URL needs a driver this installation lacks (`psycopg`, which the
    `postgresql` extra installs): nothing was opened. `name` is the missing module."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"{module} is not installed; the store's URL needs it: {install_hint(extra)}",
            name=module,
        )


class StoreConnectionError(StoreError, ConnectionError):
    """The connection to the database was lost during a call (a server restart,
    `pg_terminate_backend`, a network cut).

    `may_have_committed` says whether a retry is safe. It is True whenever the server may have
    received the call's COMMIT: the connection went while a transaction's COMMIT was on its
    way or its reply was (any write, or the end of a `Store.transaction()` block), or the lost
    statement was its own commit (a checkpoint written in autocommit outside a block). The
    server may then have kept the write, so check (e.g. `last_step`, `provider_calls`) before
    writing it again. It is False when the connection went before any COMMIT was sent (inside
    a block, or in the middle of a call's own transaction): the server rolls back an
    unfinished transaction when its connection goes, so nothing of it was kept. The Store
    drops the dead connection; the next call gets a fresh one.
    """

    def __init__(self, message: str, *, may_have_committed: bool = False) -> None:
        super().__init__(message)
        self.may_have_committed = may_have_committed


class StatementRefusedError(StoreError):
    """The database driver refused a statement before sending it (PostgreSQL's protocol
    carries at most 65,535 parameters in one statement): nothing reached the server, the
    connection is intact, and the call's transaction was rolled back, so nothing changed.
    The same call fails the same way again; it is no lost connection to retry."""


class LeaseConflictError(StoreError):
    """Another driver holds the run's lease (io-harness 0.62's `Error::Conflict`): an acquire
    refused while a live owner's lease is unlapsed, or a renewal or leased checkpoint after a
    takeover. Nothing was written. `owner` and `expires_at` name the holder and when its lease
    lapses (both empty if the row vanished meanwhile)."""

    def __init__(self, run_id: int, owner: str, expires_at: str) -> None:
        super().__init__(f"run {run_id} is held by another owner until {expires_at}")
        self.run_id = run_id
        self.owner = owner
        self.expires_at = expires_at


class HeadConflictError(StoreError):
    """A conditional session-head move found the head moved by another writer (upstream's
    `Error::Conflict` from `set_session_head_if`); nothing was changed."""


class ExportError(StoreError):
    """An export could not deliver what it read: the receiver was unreachable or refused it.
    The message names the receiver's URL (never its headers); the store is unchanged."""


class TransactionOpenError(StoreError):
    """A maintenance call that must run outside any transaction (`compact`'s `VACUUM`) was
    made inside an open `Store.transaction()` block. Nothing was done, and the block goes on:
    call it after the block ends."""


class IntegerOverflowError(StoreError):
    """A sum the database computed (tokens, spend) does not fit a signed 64-bit integer, as
    upstream's SQLite `SUM` refuses it. Nothing was changed."""


class IncompleteCopyError(SchemaError):
    """The database is a copy target left unfinished by a killed copy: it has the schema but
    none of the rows. Nothing reads or writes it; `copy --replace` (or `--resume`) redoes it."""


class TargetNotEmptyError(SchemaError):
    """The copy target already holds tables; a copy only goes into an empty database.
    Nothing was changed."""


class UnknownTablesError(SchemaError):
    """The source has tables (or columns) of a newer io-harness that a 0.13 copy cannot carry;
    refused, with nothing changed, unless told to leave them out."""


class CopyError(StoreError):
    """The copy failed while writing the target; the target was put back to empty."""


class CopyVerificationError(CopyError):
    """The row counts of source and target differ after the copy.

    Found before the commit (the usual case), the target was emptied again like any failed
    copy; found by the second count after the commit, the copy is left in place and the
    message says so."""


class SyncRefusedError(StoreError):
    """Some sources were refused (nothing of them written) while the others were synced;
    `report` says what was synced, `refused` which sources were left out and why."""

    def __init__(self, report: SyncReport) -> None:
        self.report = report
        self.refused = report.refused
        names = "; ".join(f"{r.source}: {r.error}" for r in report.refused)
        done = len(report.origins)
        super().__init__(
            f"{len(report.refused)} of {done + len(report.refused)} sources refused, nothing "
            f"of them synced ({names})"
        )


class DuplicateOriginError(InvalidValueError):
    """Two sources of one sync carry the same origin mark (one is a copy of the other);
    nothing was synced."""


class UnsendableValueError(InvalidValueError):
    """A source row holds a value the destination cannot hold as it is (a NUL character or a
    BLOB in PostgreSQL text, text or a REAL in an integer column, bytes that are not UTF-8):
    the message names the source, table, row and column. Nothing of that source was synced;
    it is synced once the row is repaired."""


class CopiedWithoutOriginError(InvalidValueError):
    """The destination already holds a source's runs under no origin (a `copy` of it made
    before copies recorded their source): a sync would send them all again. Nothing of that
    source was synced."""


class DiskFullError(StoreError):
    """A command ran out of space (a full disk, a quota, a file size limit) while writing a
    file it makes (a Parquet dataset, a prune's archive) or a store (a Store's write, a sync's
    centre): the message names the file or directory and what was left as it was. Nothing
    half-written is left; free some space and run it again."""


class DatasetBusyError(StoreError):
    """Another export is writing the same Parquet dataset directory (it holds the directory's
    lock file). Nothing was written; run the export again once that one has finished."""


class MigrationConnectionError(StoreError, TypeError):
    """The Alembic environment was handed a `connection` attribute that neither is nor holds a
    SQLAlchemy `Connection` or `Engine`: the command stopped before touching any database (it
    never falls back to another target once a connection was handed over)."""


class MigrationOptionError(StoreError, ValueError):
    """An `alembic -x` option the environment does not know, or a value it cannot read
    (`-x url=…` for `-x db=…`, `-x backup=nope`): the command stopped before touching or
    creating any database."""


SHOWN_VALUE = 40
"""The most characters of a value an error or a finding quotes."""


def shown_value(value: object) -> str:
    """`value` as an error or a finding quotes it: its repr, cut at `SHOWN_VALUE`."""
    text = repr(value)
    return text if len(text) <= SHOWN_VALUE else f"{text[: SHOWN_VALUE - 1]}…"


class UnreadableValueError(StoreError, ValueError):
    """A stored value is not of the form its column holds (a lease's `renewed_at` that is no
    time stamp or whose expiry no stamp can hold, text or Infinity in an integer column), so
    the read it feeds cannot be answered — as io-harness's own read of it fails. The message
    names the table, the row, the column and the value. Nothing was changed; `harness-store
    check` names the row."""

    @classmethod
    def in_row(
        cls, table: str, key: str, row: object, column: str, value: object, what: str
    ) -> UnreadableValueError:
        """The error for `value` in `table`'s row `key` = `row`, column `column`: `what` it is
        not (`"not an integer"`)."""
        return cls(
            f"{table} row {key} {row}: its {column} is {shown_value(value)}, {what} "
            "(`harness-store check` names it; io-harness's own read of the row fails too; "
            "nothing was changed)"
        )


class DamagedStoreError(MalformedStoreError):
    """SQLite found a damaged page while reading the store ("database disk image is
    malformed"): the read stopped there, nothing was changed. `harness-store check` names what
    `PRAGMA integrity_check` finds."""


class ArchiveRefusedError(InvalidValueError):
    """A prune's archive is not a separate store that can take the runs: it is the store
    itself, one of its side files (`-wal`, `-shm`, `-journal`, `-writers`) or a link to one of
    them, or it already holds a different row under an id the pruned rows carry (another
    store's runs). Raised before the batch it concerns is copied or deleted: no run is lost."""


class LoopClosedError(StoreError):
    """An `AsyncStore` call could not go on because the event loop it was made on was closed
    under it: a `transaction()` block open when its loop closed was rolled back (nothing of it
    was committed). The store itself goes on from another loop."""


class PrivilegeError(StoreAccessError):
    """The centre's rules refused the statement (SQLSTATE 42501: a table, a column or a row
    the connected role may not write, DDL it may not run): a follower role writes only its
    own origins' rows, a reader writes nothing. Nothing of the transaction was committed."""


class DuplicateObjectError(StoreError):
    """The object a statement creates exists already (SQLSTATE 42710: a role, a policy or a
    trigger of that name). Nothing of the transaction was committed."""


class OriginOfAnotherRoleError(PrivilegeError):
    """A follower role tried to sync (or change) an origin that is bound to another role, or
    to the owner: each origin of a centre with roles is written by the one role it belongs
    to. The source is refused; nothing of it was written."""


class StoreClosedError(StoreError):
    """A call on a Store (or an `AsyncStore`, or a connector of the package's) after it was
    closed: nothing was read or written. Open the store again."""


class UnansweredError(StoreConnectionError):
    """A connection to a PostgreSQL server failed with no answer of the server's (the driver's
    error carries no SQLSTATE): it was lost, or (`connecting`) it was never made — no session
    of the server's ever began: the server is down or out of reach, or it refused the login
    (an unknown role, a wrong password, a database that does not exist). The driver cannot
    say which; whether the server's port answers can (the command and `sync --follow` ask)."""

    def __init__(
        self, message: str, *, connecting: bool = False, may_have_committed: bool = False
    ) -> None:
        super().__init__(message, may_have_committed=may_have_committed)
        self.connecting = connecting
