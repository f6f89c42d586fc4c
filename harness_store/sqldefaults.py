"""The database's clock, spelled once per backend: what "now" is in SQL, and the stamps made
of it (the server defaults of upstream's later tables, and the stamps the Store writes).

io-harness 0.18 onwards stamps new rows in SQL: `DEFAULT (datetime('now'))` (second precision,
a space between date and time) on some tables, `DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))`
(upstream's usual stamp) on others. SQLite gets those exact expressions, so a store built here
has upstream's shape; PostgreSQL gets the same text from the server clock in UTC.

One clock per backend (`NOW`): SQLite's `'now'`, the same instant for a whole statement;
PostgreSQL's `clock_timestamp()`, the wall clock. Not PostgreSQL's `now()`, which is the
transaction's start: inside one transaction (`Store.transaction()`, a checkpoint's) every row
would carry the instant it began, a lease renewed late in it would be renewed in the past, and
a run started and finished in it would have taken no time; SQLite's `'now'` never stands
still for a transaction, and PostgreSQL's stamps mean what SQLite's do. (A PostgreSQL store
whose tables were made before this keeps `now()` in those columns' defaults.)
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = [
    "NOW",
    "STAMP_OF",
    "DatetimeNow",
    "StampNow",
    "datetime_now",
    "stamp_now",
    "stamp_now_sql",
]

NOW = {"sqlite": "'now'", "postgresql": "clock_timestamp()"}
"""Each backend's SQL now (see the module): the one spelling, which every stamp, default and
elapsed time the package computes in SQL is made of. SQLite's is a time value its date
functions take (`julianday('now')`)."""

STAMP_OF = {
    "sqlite": "strftime('%Y-%m-%dT%H:%M:%fZ',{t})",
    "postgresql": "to_char({t} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
}
"""An instant `t` as upstream's millisecond UTC stamp (`2026-11-30T19:00:00.000Z`), per backend."""

SPACED_OF = {
    "sqlite": "datetime({t})",
    "postgresql": "to_char({t} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')",
}
"""An instant `t` as SQLite's `datetime` text (`2026-11-30 19:00:00`, UTC), per backend."""


def stamp_now_sql(backend: str) -> str:
    """SQL for now as upstream's stamp on `backend` (`sqlite` or `postgresql`)."""
    return STAMP_OF[backend].format(t=NOW[backend])


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
    return stamp_now_sql("sqlite")


@compiles(StampNow)
def _stamp_other(element: StampNow, compiler: Any, **kw: Any) -> str:
    return stamp_now_sql("postgresql")


@compiles(DatetimeNow, "sqlite")
def _datetime_sqlite(element: DatetimeNow, compiler: Any, **kw: Any) -> str:
    return SPACED_OF["sqlite"].format(t=NOW["sqlite"])


@compiles(DatetimeNow)
def _datetime_other(element: DatetimeNow, compiler: Any, **kw: Any) -> str:
    return SPACED_OF["postgresql"].format(t=NOW["postgresql"])


def stamp_now() -> StampNow:
    """A server default: upstream's millisecond UTC stamp."""
    return StampNow()


def datetime_now() -> DatetimeNow:
    """A server default: `datetime('now')`'s second-precision UTC text."""
    return DatetimeNow()
