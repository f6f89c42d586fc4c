"""Runs as typed columnar tables: any table of the store as Arrow, and as a DataFrame.

The Store's methods (`arrow`, `iter_arrow`, `frame`), and the operations the analysis exports
(`analytics`) read a store with beside them, documented here rather than reached for as the
Store's privates: `arrow_schema`, `is_synced`, `read_table`, `count_rows` and `run_marks`.
The tables' shapes, statements and conversion to Arrow are `harness_store.arrow`'s, below the
Store.

Each read is one SQLAlchemy Core statement, compiled once and streamed in batches of plain
tuples through the connector (`Connector.stream`: a server-side cursor on PostgreSQL,
`fetchmany` on SQLite), so `iter_arrow` holds one batch at a time whatever the store's size.
pyarrow (the `analytics` extra) is imported on first use only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidValueError
from .marks import pages, reads
from .release_tables import OlderStoreMixin

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 32_768
"""Rows in one record batch of `iter_arrow`."""

MARK_ROWS = 8_192
"""Rows `run_marks` reads at a time (a run's whole row each, as Python objects), and runs in
one of its batches."""


class ArrowMixin(OlderStoreMixin):
    """`arrow`, `iter_arrow` and `frame`: the store's tables with upstream's types restored."""

    _origins_seen = False

    @reads
    def arrow(
        self,
        table: str,
        *,
        runs: Iterable[int] | None = None,
        since: str | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """A table of the store as a `pyarrow.Table`, with upstream's types restored: stamps
        as `timestamp[us, UTC]`, upstream's `u64` counts as `int64` (the signed value the
        store keeps), booleans as `bool`; JSON stays text, with parsed columns
        beside it where upstream fixes its shape (a step's `tool` and `tool_args`, a plan's
        steps, a policy's defaults, …). A synced store adds each row's `origin`.

        `runs` keeps the rows of those runs; `since` (a time, `harness_store.stamps`: a date
        is that day's start, UTC) the rows stamped at or after it, in either of upstream's
        stamp spellings (a table without a stamp of its own: the rows of runs started at or
        after it); `columns` chooses and orders the columns. Rows come in key
        order.
        """
        import pyarrow as pa

        schema = arrow_schema(self, table, columns=columns)
        return pa.Table.from_batches(
            list(self.iter_arrow(table, runs=runs, since=since, columns=columns)), schema=schema
        )

    @pages("batch_rows")
    def iter_arrow(
        self,
        table: str,
        *,
        runs: Iterable[int] | None = None,
        since: str | None = None,
        columns: list[str] | None = None,
        after: int | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """`arrow` as record batches of at most `batch_rows` rows, read as they are consumed
        (constant memory), inside one read transaction (one snapshot). On SQLite the Store's
        connection is this iterator's until it is exhausted or closed. `after` keeps the rows
        whose id is above it, in an append-only table (what an incremental export reads)."""
        return self._arrow_batches(
            table, runs=runs, since=since, columns=columns, after=after, batch_rows=batch_rows
        )

    def _arrow_batches(
        self,
        table: str,
        *,
        runs: Iterable[int] | None = None,
        since: str | None = None,
        columns: list[str] | None = None,
        after: int | None = None,
        through: int | None = None,
        batch_rows: int = BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """`iter_arrow`, and with `through` only the rows whose id is at most it (an
        incremental export reading again the rows it wrote of runs that changed)."""
        from ..arrow.convert import to_batch
        from ..arrow.query import Filters, read_statement
        from ..arrow.schema import ORIGIN, shape_of

        if batch_rows < 1:
            raise InvalidValueError(f"batch_rows must be at least 1, got {batch_rows}")
        shape = shape_of(table)
        filters = Filters.of(runs, since, after, through)
        schema = arrow_schema(self, table, columns=columns)
        origin = ORIGIN in schema.names
        stored = shape.stored_columns(columns)
        names = [*stored, ORIGIN] if origin else stored
        statement = read_statement(shape, stored, filters, origin=origin)
        self._refuse_missing(statement)  # a store of an older release: say to upgrade it
        with self._read() as conn:
            empty = True
            for rows in self._stream(conn, statement, batch_rows):
                empty = False
                batch = to_batch(shape, names, rows, schema)
                if isinstance(rows, list):
                    rows.clear()  # the driver's values go now, not at the next fetch
                yield batch
            if empty:
                yield to_batch(shape, names, [], schema)

    @reads
    def frame(
        self,
        table: str,
        *,
        runs: Iterable[int] | None = None,
        since: str | None = None,
        columns: list[str] | None = None,
        engine: Literal["pandas", "polars"] = "pandas",
    ) -> Any:
        """`arrow(...)` as a DataFrame: pandas by default (Arrow-backed dtypes, so `int64`
        with nulls, nullable `bool` and UTC stamps keep their types), polars with
        `engine="polars"`. The same Arrow table, converted once; the library must be
        installed."""
        data = self.arrow(table, runs=runs, since=since, columns=columns)
        if engine == "polars":
            import polars as pl

            return pl.from_arrow(data)
        if engine == "pandas":
            import pandas as pd

            return data.to_pandas(types_mapper=pd.ArrowDtype)
        raise InvalidValueError(f"engine must be 'pandas' or 'polars', got {engine!r}")


# --- what the analysis exports read (`analytics`): the Store's documented operations ---


def arrow_schema(store: ArrowMixin, table: str, *, columns: list[str] | None = None) -> pa.Schema:
    """The Arrow schema `store.arrow(table, columns=columns)` returns."""
    from ..arrow.schema import ORIGIN, shape_of

    shape = shape_of(table)
    shape.stored_columns(columns)  # refuses unknown columns
    synced = is_synced(store)
    if columns is not None and ORIGIN in columns and not synced:
        raise InvalidValueError(f"{ORIGIN!r} is a column of synced stores only")
    schema = shape.schema(columns, origin=synced and (columns is None or ORIGIN in columns))
    if columns is not None:
        schema = pa_select(schema, columns)
    return schema


def is_synced(store: ArrowMixin) -> bool:
    """Whether `store` was synced into (it holds sync's origins): its rows then carry an
    `origin`. Once true it stays true (sync never drops its tables), so it is kept."""
    from ..models.sync import ORIGINS

    if store._origins_seen:
        return True
    with store._read() as conn:
        store._origins_seen = bool(conn.dialect.has_table(conn, ORIGINS.name))
    return store._origins_seen


def read_table(
    store: ArrowMixin,
    table: str,
    *,
    runs: Iterable[int] | None = None,
    since: str | None = None,
    through: int | None = None,
) -> pa.Table:
    """`store.arrow(table, runs=…, since=…)`; with `through`, only the rows whose id is at
    most it (an incremental export reading again the rows it wrote of runs that changed)."""
    import pyarrow as pa

    batches = store._arrow_batches(table, runs=runs, since=since, through=through)
    return pa.Table.from_batches(list(batches), schema=arrow_schema(store, table))


def count_rows(
    store: ArrowMixin,
    table: str,
    *,
    runs: Iterable[int] | None = None,
    since: str | None = None,
    through: int | None = None,
) -> int:
    """How many rows `arrow(table, runs=…, since=…)` holds; with `through`, only those
    whose id is at most it (an incremental export's check that nothing it wrote was
    deleted since). Counted as all rows less those above `through`, in one snapshot: the
    whole count is served by the table's smallest index and the rest by a short range of
    the key, where `id <= through` would read every row."""
    from sqlalchemy import func, select

    from ..arrow.query import Filters, read_statement
    from ..arrow.schema import shape_of

    shape = shape_of(table)
    key = shape.table.c[shape.key[0]]
    rows = read_statement(shape, [shape.key[0]], Filters.of(runs, since), origin=False)
    rows = rows.order_by(None)
    statements = [select(func.count()).select_from(rows.subquery())]
    if through is not None:
        newer = rows.where(key > through).subquery()
        statements.append(select(func.count()).select_from(newer))
    with store._read() as conn:
        counts = [int(conn.execute(statement).scalar_one()) for statement in statements]
    return counts[0] - sum(counts[1:])


def run_marks(store: ArrowMixin, *, batch_rows: int = MARK_ROWS) -> Iterator[pa.RecordBatch]:
    """A short digest of each run's own row and its session turns' rows (`run_id`, `mark`,
    in run id order), as record batches of at most `batch_rows` runs: what an archive (a run's
    words emptied) or a prune (the run gone) shows in. An incremental export compares them
    with the last export's to find the runs whose rows it wrote may have changed since
    (`analytics.changes`).

    Streamed, whatever the store's size: the runs in id order and the turns in run order are
    read side by side in one read, each run's turns folded into its mark as it passes, and a
    batch of marks is two flat arrays of eight bytes a run. A store of an older release is
    refused here, before the first batch is asked for."""
    from sqlalchemy import select

    from .. import models as m

    runs = m.Base.metadata.tables["runs"]
    turns = m.Base.metadata.tables["session_turns"]
    of_runs = select(*runs.columns).order_by(runs.c.id)
    of_turns = select(
        turns.c.run_id, turns.c.id, turns.c.prompt, turns.c.reply, turns.c.outcome
    ).order_by(turns.c.run_id, turns.c.id)
    for statement in (of_runs, of_turns):
        store._refuse_missing(statement)  # a store of an older release: say to upgrade it
    return _marks(store, of_runs, of_turns, batch_rows)


def _marks(
    store: ArrowMixin, of_runs: Any, of_turns: Any, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    import hashlib
    from array import array

    import pyarrow as pa

    def digest(*parts: bytes) -> int:
        return int.from_bytes(hashlib.blake2b(b"".join(parts), digest_size=8).digest())

    def batch(ids: array[int], marks: array[int]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [
                pa.Array.from_buffers(pa.int64(), len(ids), [None, pa.py_buffer(ids)]),
                pa.Array.from_buffers(pa.uint64(), len(marks), [None, pa.py_buffer(marks)]),
            ],
            names=["run_id", "mark"],
        )

    with store._read() as conn:
        turn_batches = store._stream(conn, of_turns, batch_rows)
        try:
            turn_rows = (row for rows in turn_batches for row in rows)
            turn = next(turn_rows, None)
            ids, marks = array("q"), array("Q")
            for rows in store._stream(conn, of_runs, batch_rows):
                for row in rows:
                    run = int(row[0])
                    mark = digest(repr(tuple(row)).encode())
                    while turn is not None and turn[0] < run:  # a turn of no run: no mark
                        turn = next(turn_rows, None)
                    if turn is not None and turn[0] == run:
                        folded = b""
                        while turn is not None and turn[0] == run:
                            folded = digest(folded, repr(tuple(turn)).encode()).to_bytes(8)
                            turn = next(turn_rows, None)
                        mark = digest(mark.to_bytes(8), folded)
                    ids.append(run)
                    marks.append(mark)
                    if len(ids) >= batch_rows:
                        yield batch(ids, marks)
                        ids, marks = array("q"), array("Q")
            if ids:
                yield batch(ids, marks)
        finally:
            close = getattr(turn_batches, "close", None)
            if close is not None:
                close()  # the turns' cursor ends inside the read, however early this stops


def pa_select(schema: pa.Schema, columns: list[str]) -> pa.Schema:
    """`schema`'s fields in the order `columns` names them (those it has)."""
    import pyarrow as pa

    by_name = {field.name: field for field in schema}
    return pa.schema([by_name[c] for c in columns if c in by_name])
