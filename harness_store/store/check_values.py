"""The value checks of `Store.check` (see `check`): a value of another type than its column's
(SQLite keeps a text `'x'` in an INTEGER column) or a time stamp that is no time.

One aggregate pass per table counts the bad values of every column; only a column with some
is read again, for its first `ROWS_SHOWN` keys and an example. The other row checks
(`check_rows`) read only integer values (`check_rows.integers`), so a mistyped row is named
here once instead of failing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Integer, and_, case, func, not_, select

from ..dialects import Backend
from ..records.health import ROWS_SHOWN, Finding, FindingKind
from .check_rows import model_table

K = FindingKind

TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z?$"
"""A time stamp as io-harness writes them: `%Y-%m-%dT%H:%M:%fZ` (SQLite's clock) or
`YYYY-MM-DD HH:MM:SS` (`datetime('now')`), which its SQL's date functions read."""

SHOWN_VALUE = 40
"""The most characters of an example value a finding quotes."""


def time_columns(table: Any) -> list[Any]:
    """The columns that hold a time stamp: `at` and every `…_at`."""
    return [c for c in table.columns if c.name == "at" or c.name.endswith("_at")]


def integer_columns(table: Any) -> list[Any]:
    """The integer columns but a rowid key (which SQLite keeps an integer)."""
    keys = list(table.primary_key.columns)
    rowid = keys[0] if len(keys) == 1 and isinstance(keys[0].type, Integer) else None
    return [c for c in table.columns if isinstance(c.type, Integer) and c is not rowid]


def _not_a_time(backend: Backend, column: Any) -> Any:
    """Where `column` holds something but no time stamp (a number, a blob, other text)."""
    as_text = backend.stored_as(column, "text")
    matches = column.regexp_match(TIME)
    readable = matches if as_text is None else case((as_text, matches), else_=False)
    return and_(column.is_not(None), not_(func.coalesce(readable, False)))


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_VALUE else f"{text[: SHOWN_VALUE - 1]}…"


def value_findings(
    conn: Connection, backend: Backend, tables: Mapping[str, frozenset[str]]
) -> list[Finding]:
    """Values of another type than their column's, and time stamps that are no time, in every
    table of the models the store has."""
    findings: list[Finding] = []
    for name in sorted(tables):
        try:
            table = model_table(name)
        except KeyError:
            continue  # an unknown table: the schema check names it
        present = tables[name]
        checks: list[tuple[Any, str, Any]] = []
        for column in integer_columns(table):
            wrong = backend.stored_as(column, "integer")
            if column.name in present and wrong is not None:
                checks.append((column, "integer", not_(wrong)))
        for column in time_columns(table):
            if column.name in present:
                checks.append((column, "time", _not_a_time(backend, column)))
        keys = [k for k in table.primary_key.columns if k.name in present]
        if not checks or not keys:
            continue
        counts = conn.execute(
            select(*(func.coalesce(func.sum(case((bad, 1), else_=0)), 0) for _, _, bad in checks))
        ).one()
        for (column, kind, bad), count in zip(checks, counts, strict=True):
            if int(count):
                findings.append(_finding(conn, table, keys, column, kind, bad, int(count)))
    return findings


def _finding(
    conn: Connection, table: Any, keys: list[Any], column: Any, kind: str, bad: Any, count: int
) -> Finding:
    found = conn.execute(select(*keys, column).where(bad).order_by(*keys).limit(ROWS_SHOWN)).all()
    rows = tuple(row[0] if len(keys) == 1 else "/".join(str(v) for v in row[:-1]) for row in found)
    example = _shown(found[0][-1]) if found else "?"
    key = "/".join(k.name for k in keys)
    where = (
        f"{keys[0].name} IN ({', '.join(str(r) for r in rows)}{', …' if count > len(rows) else ''})"
        if len(keys) == 1
        else " OR ".join(
            "(" + " AND ".join(f"{k.name} = {v!r}" for k, v in zip(keys, row, strict=False)) + ")"
            for row in found[:3]
        )
    )
    item = f"{table.name}.{column.name}"
    if kind == "integer":
        return Finding(
            K.WRONG_TYPE,
            table.name,
            f"{item} holds {count} values that are not integers (e.g. {example})",
            "io-harness's reads of these rows fail (its row types take an integer there); "
            "SQL sums and comparisons read the text as 0 or above every number",
            key=key,
            rows=rows,
            count=count,
            command=f"DELETE FROM {table.name} WHERE {where}",
        )
    return Finding(
        K.BAD_TIME,
        table.name,
        f"{item} holds {count} values that are not time stamps (e.g. {example})",
        "io-harness's SQL reads it as a time (durations, a lease's expiry, cut-offs and "
        "ordering by time): on these rows it computes NULL or sorts them out of place",
        key=key,
        rows=rows,
        count=count,
        command=f"UPDATE {table.name} SET {column.name} = 'YYYY-MM-DDTHH:MM:SS.SSSZ' WHERE {where}",
    )
