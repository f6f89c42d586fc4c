"""Which of the later releases' tables a store has: reads on a store of an older release.

A read-only Store opens any store from 0.13 on, and every later release added tables and
columns. A read of a table the store does not have yet answers what that release had (no
plans, no events: an empty answer is the truth there); where an empty answer would hide rows
the store does hold, the read raises `UpgradeRequiredError` naming the command that upgrades it.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from sqlalchemy import Select, inspect
from sqlalchemy.sql import visitors
from sqlalchemy.sql.expression import ColumnClause, TableClause

from ..engine import where
from ..errors import UpgradeRequiredError
from .base import StoreBase


class OlderStoreMixin(StoreBase):
    """Which of the later releases' tables a store has, looked up once per Store."""

    @cached_property
    def _tables_present(self) -> frozenset[str]:
        with self._read() as conn:
            return frozenset(inspect(conn).get_table_names())

    def _lacks(self, table: str, *columns: str) -> bool:
        """Whether the store has no `table` yet (or not all of its `columns`): it is of a
        release older than the one that added them."""
        if table not in self._tables_present:
            return True
        return bool(columns) and not self._has_columns(table, *columns)

    def _refuse_older(self, what: str) -> UpgradeRequiredError:
        """The error for a read this store's release cannot answer truthfully."""
        shown = where(self.url)
        return UpgradeRequiredError(
            f"{shown} is of an io-harness release without {what}; run "
            f"`harness-store upgrade {shown}` to read it (nothing was changed)"
        )

    def _refuse_missing(self, statement: Select[Any]) -> None:
        """`UpgradeRequiredError` when the store lacks a table or column `statement` reads
        (its select list, joins and conditions): for reads that need the newest shape whole
        (the exporters'), checked before anything is read."""
        read: dict[str, set[str]] = {}
        for element in visitors.iterate(statement):
            table = getattr(element, "table", None)
            if isinstance(element, ColumnClause) and isinstance(table, TableClause):
                read.setdefault(table.name, set()).add(element.name)
        for name, columns in sorted(read.items()):
            if self._lacks(name, *columns):
                raise self._refuse_older(f"{name} ({', '.join(sorted(columns))})")
