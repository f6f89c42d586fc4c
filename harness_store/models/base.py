"""The declarative base and the column helpers every model module shares.

On SQLite the DDL these models emit is upstream's own shape — `TEXT`/`INTEGER` types, the same
nullability and server defaults, `AUTOINCREMENT` exactly where upstream has it, no constraint
upstream lacks — so a store created here opens in io-harness as its own. On PostgreSQL the
integers widen to `BIGINT` (upstream's ids are `i64`, its token counts `u64`) and the clock
defaults render from the server clock in the same text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import MetaData, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ..sqldefaults import datetime_now, stamp_now
from ..sqltypes import INT

AUTOINCREMENT: dict[str, Any] = {"sqlite_autoincrement": True}
"""Table option for upstream's `INTEGER PRIMARY KEY AUTOINCREMENT` ids (ids never reused)."""


def rowid_key(*, autoincrement: bool = True) -> Mapped[int]:
    """An `INTEGER PRIMARY KEY` as upstream declares it: the rowid, with no explicit NOT NULL."""
    return mapped_column(primary_key=True, nullable=True, autoincrement=autoincrement)


def stamped() -> Mapped[str]:
    """`TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))`: upstream's row stamp."""
    return mapped_column(server_default=stamp_now())


def dated() -> Mapped[str]:
    """`TEXT NOT NULL DEFAULT (datetime('now'))`: the second-precision stamp of some tables."""
    return mapped_column(server_default=datetime_now())


def defaulted(literal: str) -> Any:
    """A column with a literal SQL default, as upstream writes it (`0`, `''`, `'[]'`)."""
    return mapped_column(server_default=text(literal))


class Base(DeclarativeBase):
    """Declarative base of the run-store models."""

    metadata = MetaData()
    type_annotation_map: ClassVar[dict[Any, Any]] = {int: INT, str: Text()}
