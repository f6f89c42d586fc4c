"""What a SQLite store holds, read without harness_store: its tables, their columns and shapes,
the CREATE texts, and every row (typed, or as plain values).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any


def user_tables(conn: sqlite3.Connection) -> list[str]:
    """Return the user tables, sorted, without SQLite's own tables and `alembic_version`."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\' AND name != 'alembic_version' ORDER BY name"
    )
    return [r[0] for r in rows]


def _quote(name: str) -> str:
    """Quote an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def column_names(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Return each user table's column names in table order."""
    return {
        t: [r[1] for r in conn.execute(f"PRAGMA table_info({_quote(t)})")]
        for t in user_tables(conn)
    }


def table_shapes(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Return `PRAGMA table_info` per user table as (name, type, notnull, dflt_value, pk)."""
    return {
        t: [tuple(r[1:6]) for r in conn.execute(f"PRAGMA table_info({_quote(t)})")]
        for t in user_tables(conn)
    }


def create_texts(conn: sqlite3.Connection) -> dict[str, str]:
    """Return each user table's CREATE text as stored in `sqlite_master`."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    tables = set(user_tables(conn))
    return {name: sql for name, sql in rows if name in tables}


def dump(
    conn: sqlite3.Connection,
    columns: Mapping[str, Sequence[str]] | None = None,
    *,
    typed: bool = False,
) -> dict[str, list[tuple[Any, ...]]]:
    """Return every user table's rows ordered by primary key (else rowid).

    `columns` restricts the dump to those tables and columns (e.g. `column_names` of the store
    before an upgrade), so rows compare across an upgrade that adds columns. `typed=True`
    pairs each value with its SQLite storage class, so 1, 1.0 and '1' differ.
    """
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in user_tables(conn) if columns is None else list(columns):
        info = list(conn.execute(f"PRAGMA table_info({_quote(table)})"))
        names = [r[1] for r in info] if columns is None else list(columns[table])
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        order = ", ".join(_quote(c) for c in pk) if pk else "rowid"
        if typed:
            cols = ", ".join(f"typeof({_quote(c)}), {_quote(c)}" for c in names)
        else:
            cols = ", ".join(_quote(c) for c in names)
        rows = conn.execute(f"SELECT {cols} FROM {_quote(table)} ORDER BY {order}").fetchall()
        if typed:
            rows = [tuple(zip(r[::2], r[1::2], strict=True)) for r in rows]
        out[table] = [tuple(r) for r in rows]
    return out
