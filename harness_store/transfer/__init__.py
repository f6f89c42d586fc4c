"""Copying a whole run store into an empty database: SQLite → PostgreSQL, and back.

`copy_store(source, target)` moves every row of every io-harness table the source has from one
store to another, ids and values unchanged, and checks the row counts of both sides at the end.
It is what `harness-store copy SRC DST` runs.

What it does, in order:

1. Opens the source through the one read-only open, `Store.open(read_only=True)`'s (a SQLite
   file through `mode=ro`, or `immutable=1` when it is a closed WAL store or on read-only
   media, so no `-wal`/`-shm` is left beside it; PostgreSQL read-only; what a killed copy left
   is refused), checks a SQLite source's pages with `PRAGMA quick_check` (a damaged one raises
   `MalformedStoreError` naming it), and reads everything in one snapshot of the Store's
   connector (`REPEATABLE READ` on PostgreSQL), so a store still being written by an agent is
   copied as of one instant (a writer that opens a store read as a still file makes the copy
   start again, in a new snapshot that sees the writer — see `reading`). The source is never
   changed — not even upgraded: it must already hold the whole 0.13 schema (harness_store's
   revision 0.13 or later, or an io-harness store of 0.13 or later), else
   `UpgradeRequiredError` says to upgrade it first.
2. Refuses, with `TargetNotEmptyError` and nothing changed, a target whose tables hold rows
   (or that has views). A target whose tables are all empty (what `harness-store upgrade
   URL` builds) is emptied and copied into. A SQLite target that does not exist yet is
   created, with the permission bits (and group) of a SQLite source.
3. Builds the target's schema by running the Alembic chain (`migrate.upgrade`), exactly as a new
   store is built: every table, harness_store's indexes, the checkpoint-format marker,
   the head stamp.
4. In **one transaction** on the target, per table in foreign-key order (`runs` before
   `steps`): reads the source in primary-key order, `batch_size` rows at a time, and streams
   the rows, ids included, through the backend's bulk path (`Backend.bulk_insert`: one `COPY`
   a table on PostgreSQL, `executemany` batches on SQLite), the one sync takes. Then it copies
   the source's checkpoint-format marker, lets the backend move its id generators past the copied
   ids (`Backend.after_copy`: `setval` on PostgreSQL, so the next `start_run` gets `MAX(id)+1`),
   and counts every table on the target: a count that differs from the source's raises
   `CopyVerificationError` before anything is committed. A SQLite source is recorded in the
   same transaction as a sync origin of the target, with the id maps and marks a sync of the
   snapshot would have left (`sync.core.adopt_copy`; `CopyReport.origin`), so a later
   `sync` of the source into the target sends only what changed since the copy.
5. After the commit, counts again on a fresh connection (what other clients will see).

Between steps 3 and 4 a marker table (`COPY_MARKER`) is committed in the target; the
transaction of step 4 drops it with its last statement. A target killed mid-copy (SIGKILL,
power loss) therefore still has it: `Store.open`, and every `harness-store` reader, refuse such
a target with `IncompleteCopyError`, and `copy_store(..., replace=True)` (`copy --replace` or
`--resume`) empties it and copies again (its rows were never committed, so there is nothing to
continue from).

A copy that fails anywhere after step 2 — a row the target cannot store, a lost connection,
Ctrl-C (and, from the command, SIGTERM or SIGHUP), an exception from the progress callback —
rolls back the rows and then drops the schema step 3 built, so the target is empty again (a
SQLite file the copy created is deleted). The one exception is the check after the commit
(step 5): the data is committed by then, so it is reported but left in place.

Every table and column the models know (every release through 0.66) is copied when the source
has it; the target is built at head, so a source of an older release leaves the later tables
empty and the later columns at their defaults. Tables and columns of an io-harness newer than
this package knows are **not** copied; they are listed in `CopyReport.skipped_tables` (with
their row counts) and `CopyReport.skipped_columns`, so nothing is dropped silently. With
`skip_unknown_tables=False` (the command's default) such a source is refused instead, naming
them, before anything changes.

Values are copied as the driver returns them: text byte for byte (time stamps stay upstream's
`…T…Z` text), integers up to 2⁶³−1, NULLs as NULL. A value the target cannot hold as it is
— on PostgreSQL a NUL character or a BLOB in a text column, text or a REAL in an integer
column; on either backend a text whose bytes are not UTF-8 — stops the copy with a
`CopyError` naming the table, row and column (`values`, the check sync makes too): before any
row is written, or, for bytes that are not UTF-8, when the read meets them, the target then
emptied again as after any failure.

Known limit: a SQLite AUTOINCREMENT high-water mark above `MAX(id)` (left by rows deleted
outside io-harness) is not carried over; the target's next id is `MAX(id)+1` of what was copied.

The package by concern: `reading` (opening and reading the source), `plan` (its checks and
counts), `target` (refusing, emptying and recounting the target), `tables` (moving the rows),
`report` (the report and the errors); this module runs them in order. The unfinished-copy
mark, which every reader checks, is `schema.copy_marker`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from ..connector.translation import driver_message
from ..engine import safe_url, sqlite_path, to_url, where
from ..errors import MalformedStoreError
from ..formats import is_int
from ..releases import HEAD
from ..schema.copy_marker import (
    COPY_MARKER,
    IncompleteCopyError,
    copy_in_progress,
    incomplete_copy_message,
    mark_unfinished,
)
from ..schema.preflight import is_malformed
from ..targets import Target
from .plan import Plan, copied_columns, copied_tables, make_plan, opened, refuse_unknown
from .reading import (
    WriterAppeared,
    check_source_pages,
    malformed_source_message,
    no_writer_on,
    open_source,
)
from .report import (
    DEFAULT_BATCH_SIZE,
    CopyError,
    CopyReport,
    CopyVerificationError,
    Progress,
    TargetNotEmptyError,
    UnknownTablesError,
)
from .tables import fill
from .target import check_target_empty, create_like, empty_again, verify_committed

__all__ = [
    "COPY_MARKER",
    "DEFAULT_BATCH_SIZE",
    "CopyError",
    "CopyReport",
    "CopyVerificationError",
    "IncompleteCopyError",
    "Progress",
    "TargetNotEmptyError",
    "UnknownTablesError",
    "copied_columns",
    "copied_tables",
    "copy_in_progress",
    "copy_store",
    "incomplete_copy_message",
]


def copy_store(
    source: str | os.PathLike[str] | URL,
    target: str | os.PathLike[str] | URL,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
    skip_unknown_tables: bool = True,
    replace: bool = False,
) -> CopyReport:
    """Copy the store at `source` into the empty database at `target`; see the module docstring.

    `source` and `target` are file paths (SQLite) or SQLAlchemy URLs (`sqlite:///…`,
    `postgresql://…`). `progress`, if given, is first called once per table with
    `rows_done = 0`, in copy order and before any row is written (so every total is known up
    front), then after each batch with the rows done so far; the last call of a table has
    `rows_done == rows_total`.

    Raises `UpgradeRequiredError` (source below the 0.13 schema; upgrade it first),
    `SchemaError` (source empty, foreign or of a newer checkpoint format), `StoreNotFoundError`
    (no source file), `TargetNotEmptyError` (target has tables), `CopyError` (a row could not be
    written; target emptied again) and `CopyVerificationError` (row counts differ).

    With `skip_unknown_tables=False`, a source holding tables or columns of a newer io-harness
    is refused with `UnknownTablesError` naming them, before anything changes (by default
    they are left out and listed in the report). With `replace=True`, a target left by an
    interrupted copy (`IncompleteCopyError` otherwise), or one whose tables hold no rows, is
    emptied and copied into afresh; a target with rows is still refused.
    """
    if not is_int(batch_size) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    from ..store import whole_snapshot

    started = time.monotonic()
    parsed = Target.parse(source, read_only=True)
    source_url, shown = parsed.url, parsed.where
    target_url = to_url(target)
    store, found = open_source(parsed, "copied", refuse=False)
    try:
        while True:
            try:
                with whole_snapshot(store) as src:
                    if src.dialect.name == "sqlite":
                        check_source_pages(src, shown, "copied")
                    plan = make_plan(src, found, source_url)
                    if not skip_unknown_tables:
                        refuse_unknown(plan, source_url)
                    origin = _copy(
                        src,
                        plan,
                        target_url,
                        batch_size,
                        progress,
                        replace=replace,
                        check=no_writer_on(store, src),
                        mode_from=parsed.path,
                    )
                break
            except WriterAppeared:
                continue  # a writer opened the source meanwhile: read it again, seeing it
            except SQLAlchemyError as exc:
                if is_malformed(exc):
                    raise MalformedStoreError(
                        malformed_source_message(shown, driver_message(exc), "copied")
                    ) from None
                raise
    finally:
        store.close()
    return CopyReport(
        source=safe_url(source_url),
        target=safe_url(target_url),
        counts=dict(plan.counts),
        skipped_tables=dict(plan.skipped_tables),
        skipped_columns=plan.skipped_columns,
        checkpoint_format=plan.checkpoint_format,
        batch_size=batch_size,
        seconds=time.monotonic() - started,
        origin=origin,
    )


def _copy(
    src: Connection,
    plan: Plan,
    url: URL,
    batch_size: int,
    progress: Progress | None,
    *,
    replace: bool = False,
    check: Callable[[], None] | None = None,
    mode_from: Path | None = None,
) -> str | None:
    """Build the target's schema, mark it unfinished, copy into it in one transaction that
    also drops the mark (and records a SQLite source, `mode_from`, as a sync origin of the
    target), verify; empty it on failure. The origin's UUID, or None."""
    before = check_target_empty(url, replace=replace)
    from ..schema.migrate import upgrade  # Alembic only once there is work

    target_path = sqlite_path(url)
    if target_path is not None and mode_from is not None and not before.file_existed:
        create_like(target_path, [mode_from])
    try:
        try:
            report = upgrade(url, backup=False)
        except SQLAlchemyError as exc:
            raise CopyError(
                f"cannot build the store schema in {where(url)}: {driver_message(exc)}"
            ) from exc
        if report.after != HEAD:
            raise CopyError(f"building the schema of {where(url)} ended at {report.after}")
        with opened(url) as target:
            mark_unfinished(target)
            origin = fill(src, plan, target, batch_size, progress, check, origin_of=mode_from)
    except BaseException as exc:
        try:
            empty_again(url, before)
        except Exception as cleanup:  # pragma: no cover - depends on the failure
            exc.add_note(
                f"harness_store: emptying {where(url)} after the failed copy also failed "
                f"({cleanup}); it may hold a partial schema — drop its tables before retrying"
            )
        raise
    verify_committed(plan, url)
    return origin
