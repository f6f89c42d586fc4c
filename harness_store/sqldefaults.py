"""Server-side clock defaults of upstream's later tables, rendered per backend.

io-harness 0.18 onwards stamps new rows in SQL: `DEFAULT (datetime('now'))` (second precision,
a space between date and time) on some tables, `DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))`
(upstream's usual stamp) on others. SQLite gets those exact expressions, so a store built here
has upstream's shape; PostgreSQL gets the same text from the server clock in UTC.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["DatetimeNow", "StampNow", "datetime_now", "stamp_now"]


class StampNow(FunctionElement[str]):
    """Now as upstream's millisecond UTC stamp, `2026-11-30T19:00:00.000Z`."""

    type = String()
    inherit_cache = True


class DatetimeNow(FunctionElement[str]):
    """Now as SQLite's `datetime('now')` renders it, `2026-11-30 19:00:00` (UTC)."""

    type = String()
    inherit_cache = True


@compiles(StampNow, "sqlite")
def _stamp_sqlite(element: StampNow, compiler: Any, **kw: Any) -> str:
    return "strftime('%Y-%m-%dT%H:%M:%fZ','now')"


@compiles(StampNow)
def _stamp_other(element: StampNow, compiler: Any, **kw: Any) -> str:
    return "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"


@compiles(DatetimeNow, "sqlite")
def _datetime_sqlite(element: DatetimeNow, compiler: Any, **kw: Any) -> str:
    return "datetime('now')"


@compiles(DatetimeNow)
def _datetime_other(element: DatetimeNow, compiler: Any, **kw: Any) -> str:
    return "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')"


def stamp_now() -> StampNow:
    """A server default: upstream's millisecond UTC stamp."""
    return StampNow()


def datetime_now() -> DatetimeNow:
    """A server default: `datetime('now')`'s second-precision UTC text."""
    return DatetimeNow()
