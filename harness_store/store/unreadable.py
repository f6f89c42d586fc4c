"""A stored value no read can take, named by its row: SQLite keeps Infinity, a fraction, text or
a BLOB in an INTEGER column, and a read that meets one raises `UnreadableValueError` naming the
table, the row, the column and the value (as io-harness's own read of the row fails), never a
raw `OverflowError` or `TypeError` from what it would have computed with it.

Rows read one by one are checked as they are made (`check_integers`); a sum SQLite computed
over such a value comes back a REAL (its `SUM` of anything but integers is one), and the row is
then found by one more query (`integer_total`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, Integer, not_, select

from .. import models as m
from ..connector.translation import is_generic
from ..dialects import Backend
from ..errors import IntegerOverflowError, StoreError, UnreadableValueError, shown_value
from ..formats import token_sum

shown = shown_value


def not_an_integer(table: str, key: str, row: object, column: str, value: object) -> Exception:
    """The error for `value`, in `table`'s row `key` = `row`, where `column` holds integers."""
    return UnreadableValueError.in_row(table, key, row, column, value, "not an integer")


_INTEGER_TYPES = {int, type(None)}
"""The types a value read from an integer column may have."""


def is_integer(value: object) -> bool:
    """Whether a value read from an integer column is one (or NULL)."""
    return value is None or type(value) is int


def integer_columns(columns: Iterable[Any]) -> list[tuple[int, str, str, str]]:
    """(position, table, column, the table's key) of each selected table column of an integer
    type; the key is `id`, or the one a table keyed by its run has (`run_id`)."""
    return [
        (i, str(c.table.name), str(c.name), _key(c.table))
        for i, c in enumerate(columns)
        if isinstance(c, Column) and isinstance(c.type, Integer) and c.table is not None
    ]


def _key(table: Any) -> str:
    keys = [c.name for c in table.primary_key.columns]
    return "id" if "id" in table.c or len(keys) != 1 else str(keys[0])


def check_integers(
    rows: Sequence[Sequence[Any]], columns: Sequence[tuple[int, str, str, str]], key: int
) -> None:
    """Raise `UnreadableValueError` at the first of `rows` whose value at one of `columns`
    (as `integer_columns` gives them) is not an integer; `key` is where each row's id is.
    The common page, all integers, costs one set of the types met per column."""
    for i, *_ in columns:
        if not {type(row[i]) for row in rows} <= _INTEGER_TYPES:
            for _ in checked(rows, columns, key):
                pass


def checked(
    rows: Iterable[Sequence[Any]], columns: Sequence[tuple[int, str, str, str]], key: int
) -> Iterator[Sequence[Any]]:
    """`rows`, each checked as `check_integers` checks them as it is taken."""
    for row in rows:
        for i, table, column, name in columns:
            if not is_integer(row[i]):
                raise not_an_integer(table, name, row[key], column, row[i])
        yield row


def first_not_integer(
    conn: Connection, backend: Backend, table: str, column: str, where: ColumnElement[bool]
) -> Exception | None:
    """The error naming the first row (by id) of `table` matching `where` whose `column`
    holds no integer; None where there is none (on PostgreSQL there never is)."""
    t = m.Base.metadata.tables[table]
    integer = backend.stored_as(t.c[column], "integer")
    if integer is None:
        return None
    found = conn.execute(
        select(t.c.id, t.c[column]).where(where, not_(integer)).order_by(t.c.id).limit(1)
    ).first()
    return None if found is None else not_an_integer(table, "id", found[0], column, found[1])


def integer_total(
    total: Any,
    read: Callable[[], AbstractContextManager[Connection]],
    backend: Backend,
    sources: Sequence[tuple[str, str, ColumnElement[bool]]],
) -> int:
    """A sum or greatest value of integers (`token_sum`), or, where SQLite met a value that is
    no integer (its `SUM` is then a REAL; its `MAX` the text), `UnreadableValueError` naming the
    first such row of `sources` ((table, column, which rows) were summed)."""
    if not isinstance(total, float | str | bytes):
        return token_sum(total)
    with read() as conn:
        for table, column, where in sources:
            found = first_not_integer(conn, backend, table, column, where)
            if found is not None:
                raise found
    raise UnreadableValueError(
        f"a sum of integers is {shown(total)}: a summed value is none (nothing was changed)"
    )


@contextmanager
def summing() -> Iterator[None]:
    """A read of SQL sums: SQLite's `SUM` past 64 bits fails with the generic result code
    (it has no more specific one), which a SELECT over the store's own tables raises for
    nothing else, so it is raised here as the `IntegerOverflowError` PostgreSQL's code gives."""
    try:
        yield
    except StoreError as exc:
        if sum_overflowed(exc) and not isinstance(exc, IntegerOverflowError):
            raise IntegerOverflowError(
                "a sum of integers does not fit 64 bits, as io-harness's SUM refuses it "
                "(nothing was changed)"
            ) from exc
        raise


def sum_overflowed(exc: StoreError) -> bool:
    """Whether a read of sums failed because a sum passed 64 bits (see `summing`)."""
    if isinstance(exc, IntegerOverflowError):
        return True
    cause = exc.__cause__
    return type(exc) is StoreError and cause is not None and is_generic(cause)
