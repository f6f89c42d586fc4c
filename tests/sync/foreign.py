"""Foreign values for the tests of sync and copy: what a writer other than the Store leaves in
a store, written with `sqlite3` directly, and how SQLite keeps a column's values."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

NUL = "'a' || char(0) || 'b'"
NOT_UTF8 = "CAST(x'41ff42' AS TEXT)"
BLOB = "x'00ff10'"
TEXT = "'abc'"
INFINITY = "9e999"

CASES = [
    # (table, column, value written, what the refusal says, whether SQLite holds it)
    ("steps", "decision", NUL, "NUL character", True),
    ("runs", "goal", NUL, "NUL character", True),
    ("steps", "result", NOT_UTF8, "not UTF-8", False),
    ("runs", "goal", NOT_UTF8, "not UTF-8", False),
    ("steps", "decision", BLOB, "BLOB", True),
    ("runs", "goal", BLOB, "BLOB", True),
    ("runs", "status", BLOB, "BLOB", True),
    ("steps", "tokens", TEXT, "text", True),
    ("runs", "depth", INFINITY, "real", True),
]
"""Each kind of foreign value in an append table (`steps`) and in one updated in place
(`runs`)."""

ROW = 2
"""The row given the foreign value."""


def put(path: Path, table: str, column: str, value: str) -> None:
    """Write the SQL `value` into `table.column` of row `ROW`, as a foreign writer would."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE {table} SET {column} = {value} WHERE id = {ROW}")


def stored(path: str | Path, table: str, column: str) -> list[tuple[str, bytes | None]]:
    """Every value of the column as SQLite keeps it: its storage class and its bytes."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return sorted(conn.execute(f"SELECT typeof({column}), CAST({column} AS BLOB) FROM {table}"))
