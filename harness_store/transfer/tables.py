"""Moving the rows: every table in one transaction on the target, batch by batch, counted."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table, select

from ..connector.translation import driver_message, is_untranslated
from ..dialects import Backend, backend_named
from ..errors import InvalidValueError
from ..schema.copy_marker import marker_table
from .plan import Plan, count
from .report import CopyError, CopyVerificationError, Progress
from .values import refusal, undecodable

if TYPE_CHECKING:
    from ..connector import Connector

MEMORY_TABLE = "memory"
"""The table whose keys the backend checks when a batch is refused (the `Memory` model's)."""


def fill(
    src: Connection,
    plan: Plan,
    target: Connector,
    batch_size: int,
    progress: Progress | None,
    before_commit: Callable[[], None] | None = None,
    origin_of: Path | None = None,
) -> str | None:
    """Every row, the marker, the id generators, and the in-transaction count check; the
    unfinished-copy marker is dropped by the same transaction. `before_commit` may still
    refuse the commit (by raising). `origin_of`, the path of a SQLite source, is recorded in
    the same transaction as a sync origin of the target (`sync.adopt_copy`): a store keeps
    its identity from copy to sync. The origin's UUID, or None."""
    # A faithful copy: orphan steps included (SQLite's foreign keys off for it).
    with target.load(keep_orphans=True) as dst:
        backend = backend_named(dst.dialect.name)
        for table in plan.tables:  # every value the target cannot hold, before any row
            found = refusal(src, table, plan.columns[table.name], backend)
            if found is not None:
                raise CopyError(f"{found}; {LEFT_AS_IT_WAS}")
        if progress is not None:
            for table in plan.tables:
                progress(table.name, 0, plan.counts[table.name])
        for table in plan.tables:
            copied = copy_table(src, dst, table, backend, batch_size, plan, progress)
            if copied != plan.counts[table.name]:
                raise CopyVerificationError(
                    f"{table.name}: read {copied} rows from the source, which counted "
                    f"{plan.counts[table.name]}; nothing was committed"
                )
        backend.set_checkpoint_format(dst, plan.checkpoint_format)
        backend.after_copy(dst, plan.tables)
        compare(plan.counts, {t.name: count(dst, t.name) for t in plan.tables}, "")
        origin = None
        if origin_of is not None:
            from ..sync.core import adopt_copy  # sync builds on copy's modules: on first use

            origin = adopt_copy(src, dst, origin_of)
        marker_table().drop(dst)
        if before_commit is not None:
            before_commit()
    return origin


def copy_table(
    src: Connection,
    dst: Connection,
    table: Table,
    backend: Backend,
    batch_size: int,
    plan: Plan,
    progress: Progress | None,
) -> int:
    """Stream one table in primary-key order through the backend's bulk path
    (`Backend.bulk_insert`: one COPY on PostgreSQL, `executemany` batches on SQLite), the one
    sync's append tables take too; progress after every `batch_size` rows read."""
    total = plan.counts[table.name]
    columns = plan.columns[table.name]
    names = [c.name for c in columns]
    statement = select(*columns).order_by(*table.primary_key.columns)
    done = 0
    reading: list[BaseException] = []
    """What reading the source or the progress callback raised (not the target's refusal)."""

    def rows() -> Iterator[Sequence[Any]]:
        nonlocal done
        try:
            for batch in source_batches(src, statement, batch_size):
                yield from batch
                done += len(batch)
                if progress is not None:
                    progress(table.name, done, total)
        except BaseException as exc:
            reading.append(exc)
            raise

    try:
        backend.bulk_insert(dst, table, names, rows())
    except Exception as exc:  # a driver error of the target, or a value it refused
        if reading and _caused_by(exc, reading[0]):
            found = _undecodable(src, table, columns, reading[0])
            if found is not None:
                raise CopyError(f"{found}; {LEFT_AS_IT_WAS}") from None
            raise
        raise CopyError(explain_table(src, table, statement, batch_size, backend, exc)) from exc
    return done


LEFT_AS_IT_WAS = "the target was emptied again and the source left as it is"


def _undecodable(
    src: Connection, table: Table, columns: list[Any], exc: BaseException
) -> str | None:
    """When reading the source failed without a code of its driver's (as a text whose bytes
    are not UTF-8 fails), the first such text of `table`, said with its row; else None."""
    if not is_untranslated(exc):
        return None
    try:
        return undecodable(src, table, columns)
    except Exception:  # the look failed too: the first error is said
        return None


def _caused_by(exc: BaseException, origin: BaseException) -> bool:
    """Whether `exc` is `origin` or was raised while handling it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if current is origin:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def explain_table(
    src: Connection, table: Table, statement: Any, batch_size: int, backend: Backend, exc: Exception
) -> str:
    """Why a table could not be written: the first source row the target cannot hold, found
    by reading the table again, else what the database said."""
    names = [c.name for c in statement.selected_columns]
    for batch in source_batches(src, statement, batch_size):
        rows = [dict(zip(names, row, strict=True)) for row in batch]
        found = explain_row(table, rows, backend)
        if found is not None:
            return found
    return explain(table, [], backend, exc)


def source_batches(src: Connection, statement: Any, size: int) -> Iterator[list[Sequence[Any]]]:
    """The statement's rows as plain tuples, `size` at a time: on SQLite straight from the
    driver's cursor (inside the snapshot's transaction), without a SQLAlchemy row per value."""
    if src.dialect.name != "sqlite":
        result = src.execute(statement, execution_options={"yield_per": size})
        for part in result.partitions(size):
            yield [tuple(row) for row in part]
        return
    cursor = backend_named(src.dialect.name).driver_rows(src, statement)
    while batch := cursor.fetchmany(size):
        yield batch


def explain_row(table: Table, rows: Sequence[Mapping[str, Any]], backend: Backend) -> str | None:
    """The first of `rows` the target cannot hold, said for a person, or None."""
    keys = [c.name for c in table.primary_key.columns]

    def row_name(row: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={row[k]}" for k in keys)

    for row in rows:  # a value of the wrong kind was refused before (`values.refusal`)
        if table.name == MEMORY_TABLE:
            try:
                backend.check_memory_key(str(row["workspace"]), str(row["key"]))
            except InvalidValueError as refused:
                return f"{table.name} row {row_name(row)}: {refused}; {LEFT_AS_IT_WAS}"
    return None


def explain(
    table: Table, rows: Sequence[Mapping[str, Any]], backend: Backend, exc: Exception
) -> str:
    """Why rows could not be written, naming the row and column when it can be found."""
    found = explain_row(table, rows, backend)
    if found is not None:
        return found
    keys = [c.name for c in table.primary_key.columns]

    def row_name(row: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={row[k]}" for k in keys)

    span = f"the rows {row_name(rows[0])} … {row_name(rows[-1])}" if rows else "its rows"
    lines = driver_message(exc).strip().splitlines()
    detail = " ".join(line.strip() for line in lines[:3] if not line.startswith("["))[:500]
    return f"{table.name}: {span} could not be written to the target ({detail}); {LEFT_AS_IT_WAS}"


def compare(expected: Mapping[str, int], got: Mapping[str, int], when: str) -> None:
    """Raise `CopyVerificationError` naming every table whose count is not the expected one."""
    wrong = [
        f"{name}: {expected[name]} → {got.get(name)}"
        for name in expected
        if got.get(name) != expected[name]
    ]
    if wrong:
        raise CopyVerificationError(
            f"row counts differ between source and target{when} ({'; '.join(wrong)})"
        )
