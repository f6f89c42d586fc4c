"""SQLite's text that is not UTF-8, named by its row. SQLite keeps any bytes as text; the
`sqlite3` module fails the whole read of a row holding such a text with an `OperationalError`
of its own (no SQLite result code), which names no table and no row. A read that fails so is
answered by one more look, on the error path only (the common read pays nothing): the first
text whose bytes are not UTF-8 in the tables the failed statement read (`install` notes them
on the error), said as `UnreadableValueError` with its table, row key and column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Engine,
    LargeBinary,
    String,
    Table,
    and_,
    case,
    cast,
    event,
    func,
    or_,
    select,
)
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.sql.util import find_tables

from ..errors import UnreadableValueError
from .sqlite_codes import error_code

_READ_TABLES = "harness_store_read_tables"
"""Where `install` notes, on a failed statement's driver error, the tables it read."""


def install(engine: Engine) -> None:
    """Note on a read's driver error (one of the kind `undecodable` looks into) the tables its
    statement read, so the look reads only those."""

    @event.listens_for(engine, "handle_error")
    def note_tables(context: ExceptionContext) -> None:
        error = context.original_exception
        compiled = getattr(context.execution_context, "compiled", None)
        statement = getattr(compiled, "statement", None)
        if statement is None or not _undecodable_kind(error):
            return
        tables = [t for t in find_tables(statement, include_joins=True) if isinstance(t, Table)]
        setattr(error, _READ_TABLES, tuple(tables))


def _undecodable_kind(error: BaseException) -> bool:
    """Whether a driver error may be the `sqlite3` module's failure to decode a text: an
    `OperationalError` that SQLite itself did not raise (it carries no result code)."""
    return isinstance(error, sqlite3.OperationalError) and error_code(error) is None


def read_tables(exc: BaseException) -> tuple[Table, ...] | None:
    """For an error a read may have met text that is not UTF-8 with (see `_undecodable_kind`;
    a SQLAlchemy error is looked at by its driver error): the tables its statement read, or
    `()` where it was run on the driver itself (then every table is looked at); else None."""
    error = getattr(exc, "orig", None) or exc
    if not _undecodable_kind(error):
        return None
    return tuple(getattr(error, _READ_TABLES, ()))


def undecodable(
    conn: Connection, tables: Sequence[Table], present: dict[str, frozenset[str]]
) -> UnreadableValueError | None:
    """The first text whose bytes are not UTF-8 in `tables` (none given: every table of the
    models), by each table's key, as the error naming its row; None when there is none (the
    failure was another). `present`: the store's tables and their columns (an older store
    has fewer)."""
    if not tables:
        from ..models import Base

        tables = list(Base.metadata.sorted_tables)
    for table in tables:
        columns = present.get(table.name, frozenset())
        keys = [k for k in table.primary_key.columns if k.name in columns]
        texts = [c for c in table.columns if c.name in columns]
        if len(keys) != len(table.primary_key.columns):
            continue
        for key, column, raw, _ in texts_not_utf8(conn, table, texts):
            names = "/".join(k.name for k in keys)
            row_key = key[0] if len(keys) == 1 else "/".join(str(v) for v in key)
            return UnreadableValueError.in_row(
                table.name, names, row_key, column.name, raw, "not UTF-8 text"
            )
    return None


NotUTF8 = tuple[tuple[Any, ...], Column[Any], bytes, int]
"""A text whose bytes are not UTF-8: the values of `also` and the row's key, its column, its
bytes and where in them the first byte no UTF-8 text holds is."""


def texts_not_utf8(
    conn: Connection,
    table: Table,
    columns: Sequence[Column[Any]],
    *,
    where: ColumnElement[bool] | None = None,
    also: Sequence[ColumnElement[Any]] = (),
) -> Iterator[NotUTF8]:
    """Every text among the `columns` of `table` (its rows `where` selects) whose bytes are
    not UTF-8, in key order, one per row and column: the one lookup of them, for a read that
    failed (`undecodable`), a copy and a sync (`transfer.values`). Only a text with a byte
    outside ASCII (`GLOB`, which reads each such byte as a character above 0x7f, valid or
    not) is read, as bytes, and decoded here."""
    texts = [c for c in columns if isinstance(c.type, String)]
    keys = list(table.primary_key.columns)
    if not texts or not keys:
        return
    wide = [and_(func.typeof(c) == "text", c.op("GLOB")(_WIDE)) for c in texts]
    statement = select(
        *also,
        *keys,
        *(case((w, cast(c, LargeBinary)), else_=None) for w, c in zip(wide, texts, strict=True)),
    ).where(or_(*wide))
    if where is not None:
        statement = statement.where(where)
    head = len(also) + len(keys)
    rows = conn.execute(statement.order_by(*keys), execution_options={"yield_per": 500})
    for row in rows:
        for column, raw in zip(texts, row[head:], strict=True):
            if raw is None:
                continue
            try:
                bytes(raw).decode("utf-8")
            except UnicodeDecodeError as exc:
                yield tuple(row[:head]), column, bytes(raw), exc.start


_WIDE = "*[^\x01-\x7f]*"
"""A text holding a byte outside ASCII (and a character other than NUL)."""


def _lenient(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


@contextmanager
def tolerant(conn: Connection) -> Iterator[None]:
    """Within the body, the `sqlite3` connection under `conn` reads a text whose bytes are
    not UTF-8 (each such byte as a lone surrogate) instead of failing the whole read: for a
    sync that holds back the rows of such texts (`sync.quarantine`) while it reads the
    others. Only a read that failed so is answered by this slower decoding."""
    raw: Any = conn.connection.dbapi_connection
    before = raw.text_factory
    raw.text_factory = _lenient
    try:
        yield
    finally:
        raw.text_factory = before
