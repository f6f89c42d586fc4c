"""Copying a whole run store into an empty database: SQLite → PostgreSQL, and back.

`copy_store(source, target)` moves every row of every io-harness table the source has from one
store to another, ids and values unchanged, and checks the row counts of both sides at the end.
It is what `harness-store copy SRC DST` runs.

What it does, in order:

1. Opens the source **read-only** (a SQLite file through `mode=ro`; PostgreSQL in a
   `REPEATABLE READ, READ ONLY` transaction) and reads everything inside one snapshot, so a
   store still being written by an agent is copied as of one instant (upstream's stores are in
   WAL, so its writers carry on meanwhile; a SQLite source in rollback-journal mode makes them
   wait for the copy instead). A read-only connection cannot remove a WAL store's `-wal` and
   `-shm` side files when it closes, so those may be left beside the source; they hold no data
   and the next writer reuses them. The source is never changed — not even upgraded: it must
   already hold the whole 0.13 schema (harness_store's revision 0.13 or later, or an io-harness
   store of 0.13 or later), else `UpgradeRequiredError` says to upgrade it first.
2. Refuses, with `TargetNotEmptyError` and nothing changed, a target that has any table or view.
   A SQLite target that does not exist yet is created.
3. Builds the target's schema by running the Alembic chain (`migrate.upgrade`), exactly as a new
   store is built: every table, harness_store's indexes, the checkpoint-format marker,
   the head stamp.
4. In **one transaction** on the target, per table in foreign-key order (`runs` before
   `steps`): reads the source in primary-key order, `batch_size` rows at a time, and inserts
   each batch with one `executemany` of Core `insert(table)`, ids included. Then it copies the
   source's checkpoint-format marker, lets the backend move its id generators past the copied
   ids (`Backend.after_copy`: `setval` on PostgreSQL, so the next `start_run` gets `MAX(id)+1`),
   and counts every table on the target: a count that differs from the source's raises
   `CopyVerificationError` before anything is committed.
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
`…T…Z` text), integers up to 2⁶³−1, NULLs as NULL. A value the target cannot hold — a NUL
character in a SQLite text, which PostgreSQL `text` refuses — stops the copy with a
`CopyError` naming the table, row and column.

Known limit: a SQLite AUTOINCREMENT high-water mark above `MAX(id)` (left by rows deleted
outside io-harness) is not carried over; the target's next id is `MAX(id)+1` of what was copied.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    String,
    Table,
    func,
    insert,
    inspect,
    select,
)
from sqlalchemy import table as table_clause
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from .detect import StoreKind, check_sqlite_file, diagnose
from .dialects import Backend, backend_named
from .dialects.postgresql import FORMAT_TABLE
from .dialects.sqlite import KEEP_ORPHANS, WRITE
from .engine import URL_ENV, make_engine, read_only_url, safe_url, sqlite_path, to_url, where
from .errors import (
    InvalidValueError,
    SchemaError,
    StoreError,
    StoreNotFoundError,
    UpgradeRequiredError,
)
from .models import Base, Memory, table_of
from .releases import HEAD, NEWEST_KNOWN_RELEASE, SHAPES, STORE_RELEASE

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "CopyError",
    "CopyReport",
    "CopyVerificationError",
    "IncompleteCopyError",
    "Progress",
    "TargetNotEmptyError",
    "UnknownTablesError",
    "copy_in_progress",
    "copy_store",
]

DEFAULT_BATCH_SIZE = 1000
"""Rows read and inserted per batch unless told otherwise."""

Progress = Callable[[str, int, int], None]
"""`progress(table_name, rows_done, rows_total)`, called as a copy advances."""

BOOKKEEPING_TABLES = frozenset({"alembic_version", FORMAT_TABLE})
"""Tables the chain itself writes on the target; never counted as skipped data."""

SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")

COPY_MARKER = "harness_store_copy_in_progress"
"""A table that exists in a target only while a copy into it is unfinished: created (and
committed) right after the schema, dropped in the transaction that commits the rows. A target
that still has it was left by a copy killed before its commit (SIGKILL, power loss)."""

MEMORY_TABLE = table_of(Memory).name


class TargetNotEmptyError(SchemaError):
    """The copy target already holds tables; a copy only goes into an empty database.
    Nothing was changed."""


class IncompleteCopyError(SchemaError):
    """The database is a copy target left unfinished by a killed copy: it has the schema but
    none of the rows. Nothing reads or writes it; `copy --replace` (or `--resume`) redoes it."""


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


@dataclass(frozen=True)
class _Plan:
    """What the source holds, read in its snapshot before any row moves."""

    tables: tuple[Table, ...]
    columns: dict[str, list[Column[Any]]]
    """Per table, the columns the source has (a source of an older release lacks later ones)."""
    counts: dict[str, int]
    skipped_tables: dict[str, int]
    skipped_columns: tuple[str, ...]
    checkpoint_format: int


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
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    started = time.monotonic()
    source_url = to_url(source)
    target_url = to_url(target)
    source_engine = _source_engine(source_url)
    try:
        with _connected(source_engine, source_url) as src, _snapshot(src):
            plan = _plan(src, source_url)
            if not skip_unknown_tables:
                _refuse_unknown(plan, source_url)
            _copy(src, plan, target_url, batch_size, progress, replace=replace)
    finally:
        source_engine.dispose()
    return CopyReport(
        source=safe_url(source_url),
        target=safe_url(target_url),
        counts=dict(plan.counts),
        skipped_tables=dict(plan.skipped_tables),
        skipped_columns=plan.skipped_columns,
        checkpoint_format=plan.checkpoint_format,
        batch_size=batch_size,
        seconds=time.monotonic() - started,
    )


# --- the source --------------------------------------------------------------------------


def _source_engine(url: URL) -> Engine:
    """An engine that can only read the source (a read-only file is fine)."""
    path = sqlite_path(url)
    if path is not None and not url.query.get("uri"):
        if not path.exists():
            raise StoreNotFoundError(f"no run store at {path}; nothing to copy")
        check_sqlite_file(path, writable=False)
    return make_engine(read_only_url(url))


@contextmanager
def _connected(engine: Engine, url: URL) -> Iterator[Connection]:
    """A connection, with a failure to connect said in terms of the store."""
    try:
        conn = engine.connect()
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot open {where(url)}: {getattr(exc, 'orig', exc)}") from exc
    with conn:
        yield conn


@contextmanager
def _snapshot(conn: Connection) -> Iterator[None]:
    """One read-only transaction, so every read of the copy sees the same instant."""
    if conn.dialect.name == "postgresql":
        conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    conn.info[WRITE] = False
    with conn.begin():
        yield


def copied_tables(have: Mapping[str, frozenset[str]]) -> tuple[Table, ...]:
    """The tables a copy carries, in foreign-key order: every model's the source has."""
    return tuple(t for t in Base.metadata.sorted_tables if t.name in have)


def copied_columns(table: Table, have: Mapping[str, frozenset[str]]) -> list[Column[Any]]:
    """The columns of `table` a copy carries: the model's the source has."""
    return [c for c in table.columns if c.name in have.get(table.name, ())]


def _count(conn: Connection, name: str) -> int:
    return int(conn.execute(select(func.count()).select_from(table_clause(name))).scalar_one())


def _plan(src: Connection, url: URL) -> _Plan:
    """Check the source holds the whole 0.13 schema, and read its counts and marker."""
    found = diagnose(src)  # refuses foreign stores and newer checkpoint formats
    shown = where(url)
    if found.kind is StoreKind.EMPTY:
        raise SchemaError(f"{shown} holds no run store (it has no tables); nothing to copy")
    have = found.tables
    tables = copied_tables(have)
    needed = SHAPES[STORE_RELEASE]
    missing = [t for t in needed if t not in have] + [
        f"{t}.{c}" for t in needed if t in have for c in sorted(needed[t]) if c not in have[t]
    ]
    if missing:
        raise UpgradeRequiredError(
            f"{shown}: {found.describe()}; a copy needs the io-harness {STORE_RELEASE} schema "
            f"(revision {STORE_RELEASE} or later), and it lacks {', '.join(missing)}. "
            "A copy never changes its source: upgrade it first with "
            f"`harness-store upgrade {_pasteable(url)}`, then copy it"
        )
    skipped_columns = tuple(
        f"{t.name}.{name}" for t in tables for name in sorted(have[t.name] - set(t.columns.keys()))
    )
    skipped_tables = {
        name: _count(src, name)
        for name in sorted(have)
        if name not in Base.metadata.tables and name not in BOOKKEEPING_TABLES
    }
    return _Plan(
        tables=tables,
        columns={t.name: copied_columns(t, have) for t in tables},
        counts={t.name: _count(src, t.name) for t in tables},
        skipped_tables=skipped_tables,
        skipped_columns=skipped_columns,
        checkpoint_format=backend_named(src.dialect.name).checkpoint_format(src),
    )


def _pasteable(url: URL) -> str:
    """The store as a shell argument for a suggested command: a quoted path or URL, or
    `"$HARNESS_STORE_URL"` for a URL whose password must not be printed."""
    path = sqlite_path(url)
    if path is not None:
        return shlex.quote(str(path))
    return f'"${URL_ENV}"' if url.password else shlex.quote(safe_url(url))


def _refuse_unknown(plan: _Plan, url: URL) -> None:
    """Refuse a source whose tables or columns from a newer io-harness a copy would leave behind."""
    left = [f"{name} ({n} rows)" for name, n in plan.skipped_tables.items()]
    left += list(plan.skipped_columns)
    if left:
        raise UnknownTablesError(
            f"{where(url)} has tables or columns of an io-harness newer than "
            f"{NEWEST_KNOWN_RELEASE}, which a copy cannot carry: {', '.join(left)}. "
            "Nothing was changed; copy with --skip-unknown-tables to leave them out"
        )


# --- the target --------------------------------------------------------------------------


def copy_in_progress(conn: Connection) -> bool:
    """Whether the database on `conn` is the target of an unfinished (killed) copy."""
    return inspect(conn).has_table(COPY_MARKER)


def incomplete_copy_message(shown: str) -> str:
    """What a reader of an unfinished copy is told."""
    return (
        f"{shown} is an unfinished copy (the copy into it was killed before its commit): it "
        "has the schema but none of the rows, so it is not a usable store. Run the same "
        "`harness-store copy` again with --replace (or --resume) to redo it"
    )


@dataclass(frozen=True)
class _TargetBefore:
    """What the target was before the copy, so a failed copy can put it back."""

    file_existed: bool
    checkpoint_format: int


def _check_target_empty(url: URL, *, replace: bool = False) -> _TargetBefore:
    """Refuse a target with tables or views; say whether a SQLite file was there already.

    With `replace`, a target left by an interrupted copy, or whose tables hold no rows, is
    emptied first instead."""
    path = sqlite_path(url)
    if path is not None:
        if not path.exists():
            return _TargetBefore(file_existed=False, checkpoint_format=0)
        check_sqlite_file(path)
    engine = make_engine(url)
    try:
        with _connected(engine, url) as conn, conn.begin():
            inspector = inspect(conn)
            names = sorted(inspector.get_table_names()) + sorted(inspector.get_view_names())
            fmt = backend_named(conn.dialect.name).checkpoint_format(conn)
            unfinished = COPY_MARKER in names
            rowless = not inspector.get_view_names() and all(
                _count(conn, name) == 0 for name in names if name not in BOOKKEEPING_TABLES
            )
    finally:
        engine.dispose()
    if names and replace and (unfinished or rowless):
        _empty_again(url, _TargetBefore(file_existed=True, checkpoint_format=0))
        return _TargetBefore(file_existed=path is not None, checkpoint_format=0)
    if unfinished:
        raise IncompleteCopyError(incomplete_copy_message(where(url)))
    if names:
        shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
        raise TargetNotEmptyError(
            f"{where(url)} is not empty (it has {shown}); a copy only goes into an empty "
            "database, so nothing was changed. Drop its tables or choose another target"
        )
    return _TargetBefore(file_existed=path is not None, checkpoint_format=fmt)


def _copy(
    src: Connection,
    plan: _Plan,
    url: URL,
    batch_size: int,
    progress: Progress | None,
    *,
    replace: bool = False,
) -> None:
    """Build the target's schema, mark it unfinished, copy into it in one transaction that
    also drops the mark, verify; empty it on failure."""
    before = _check_target_empty(url, replace=replace)
    from .migrate import upgrade  # Alembic only once there is work

    try:
        try:
            report = upgrade(url, backup=False)
        except SQLAlchemyError as exc:
            raise CopyError(
                f"cannot build the store schema in {where(url)}: {getattr(exc, 'orig', exc)}"
            ) from exc
        if report.after != HEAD:
            raise CopyError(f"building the schema of {where(url)} ended at {report.after}")
        engine = make_engine(url)
        try:
            _mark_unfinished(engine, url)
            _fill(src, plan, engine, batch_size, progress)
        finally:
            engine.dispose()
    except BaseException as exc:
        try:
            _empty_again(url, before)
        except Exception as cleanup:  # pragma: no cover - depends on the failure
            exc.add_note(
                f"harness_store: emptying {where(url)} after the failed copy also failed "
                f"({cleanup}); it may hold a partial schema — drop its tables before retrying"
            )
        raise
    _verify_committed(plan, url)


def _fill(
    src: Connection, plan: _Plan, engine: Engine, batch_size: int, progress: Progress | None
) -> None:
    """Every row, the marker, the id generators, and the in-transaction count check."""
    with engine.connect() as dst:
        backend = backend_named(dst.dialect.name)
        dst.info[WRITE] = True  # SQLite: take the write lock up front (BEGIN IMMEDIATE)
        dst.info[KEEP_ORPHANS] = True  # SQLite: a faithful copy, orphan steps included
        with dst.begin():
            if progress is not None:
                for table in plan.tables:
                    progress(table.name, 0, plan.counts[table.name])
            for table in plan.tables:
                copied = _copy_table(src, dst, table, backend, batch_size, plan, progress)
                if copied != plan.counts[table.name]:
                    raise CopyVerificationError(
                        f"{table.name}: read {copied} rows from the source, which counted "
                        f"{plan.counts[table.name]}; nothing was committed"
                    )
            backend.set_checkpoint_format(dst, plan.checkpoint_format)
            backend.after_copy(dst, plan.tables)
            _compare(plan.counts, {t.name: _count(dst, t.name) for t in plan.tables}, "")
            _marker_table().drop(dst)


def _marker_table() -> Table:
    return Table(COPY_MARKER, MetaData(), Column("source", String(2000)))


def _mark_unfinished(engine: Engine, url: URL) -> None:
    """Commit the marker saying this target's copy has not finished (see `COPY_MARKER`)."""
    with engine.connect() as conn:
        conn.info[WRITE] = True
        with conn.begin():
            _marker_table().create(conn)


def _copy_table(
    src: Connection,
    dst: Connection,
    table: Table,
    backend: Backend,
    batch_size: int,
    plan: _Plan,
    progress: Progress | None,
) -> int:
    """Stream one table in primary-key order, `batch_size` rows per `executemany`."""
    total = plan.counts[table.name]
    statement = select(*plan.columns[table.name]).order_by(*table.primary_key.columns)
    result = src.execute(statement, execution_options={"yield_per": batch_size})
    done = 0
    for batch in result.partitions(batch_size):
        rows = [row._asdict() for row in batch]
        try:
            dst.execute(insert(table), rows)
        except SQLAlchemyError as exc:
            raise CopyError(_explain(table, rows, backend, exc)) from exc
        done += len(rows)
        if progress is not None:
            progress(table.name, done, total)
    return done


def _explain(
    table: Table, rows: Sequence[Mapping[str, Any]], backend: Backend, exc: Exception
) -> str:
    """Why a batch could not be written, naming the row and column when it can be found."""
    keys = [c.name for c in table.primary_key.columns]

    def row_name(row: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={row[k]}" for k in keys)

    for row in rows:
        for column, value in row.items():
            if isinstance(value, str) and "\x00" in value:
                return (
                    f"{table.name}.{column} of the row {row_name(row)} holds a NUL character "
                    f"(\\x00), which {backend.name} text cannot store; the target was emptied "
                    "again and the source left as it is"
                )
        if table.name == MEMORY_TABLE:
            try:
                backend.check_memory_key(str(row["workspace"]), str(row["key"]))
            except InvalidValueError as refused:
                return (
                    f"{table.name} row {row_name(row)}: {refused}; the target was emptied "
                    "again and the source left as it is"
                )
    span = f"{row_name(rows[0])} … {row_name(rows[-1])}" if rows else "?"
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    detail = " ".join(line.strip() for line in lines[:3] if not line.startswith("["))[:500]
    return (
        f"{table.name}: the rows {span} could not be written to the target ({detail}); "
        "the target was emptied again and the source left as it is"
    )


def _compare(expected: Mapping[str, int], got: Mapping[str, int], when: str) -> None:
    wrong = [
        f"{name}: {expected[name]} → {got.get(name)}"
        for name in expected
        if got.get(name) != expected[name]
    ]
    if wrong:
        raise CopyVerificationError(
            f"row counts differ between source and target{when} ({'; '.join(wrong)})"
        )


def _verify_committed(plan: _Plan, url: URL) -> None:
    """Count the target again on a fresh connection, as other clients will see it."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn, conn.begin():
            got = {t.name: _count(conn, t.name) for t in plan.tables}
    finally:
        engine.dispose()
    _compare(plan.counts, got, " after the commit (the copy was committed and left in place)")


def _empty_again(url: URL, before: _TargetBefore) -> None:
    """Put a target whose copy failed back as it was: no tables (or no file at all)."""
    path = sqlite_path(url)
    if path is not None and not before.file_existed:
        for candidate in (path, *(Path(f"{path}{suffix}") for suffix in SQLITE_SIDE_FILES)):
            with suppress(FileNotFoundError):
                candidate.unlink()
        return
    if path is not None and not path.exists():
        return
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            conn.info[WRITE] = True
            with conn.begin():
                backend_named(conn.dialect.name).set_checkpoint_format(
                    conn, before.checkpoint_format
                )
                reflected = MetaData()
                reflected.reflect(conn)
                reflected.drop_all(conn)
    finally:
        engine.dispose()
