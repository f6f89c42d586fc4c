"""Pre-compiled statements for the Store's hot paths, and how a batch of them is run.

Checkpoints and tree aggregates run statements compiled once straight on the driver, through
the connector (`connector`): on SQLite in group commit on the Store's one connection
(`connector.group`), on PostgreSQL on a kept connection in autocommit
(`connector.kept_connections`), and inside `Store.transaction()` in the block's own
transaction (a savepoint per call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.sql import ClauseElement

if TYPE_CHECKING:
    from .group import Call


@dataclass(frozen=True)
class DriverStatement:
    """A Core statement compiled once for the engine's dialect, run on the driver directly."""

    sql: str
    names: tuple[str, ...] | None
    """Parameter order for a positional paramstyle; None when the driver takes a mapping."""
    fixed: Mapping[str, Any] | None = None
    """The values the statement was built with (its constants, bound as parameters), which
    every call sends beside its own; None when it has none."""

    @classmethod
    def compile(cls, statement: ClauseElement, engine: Engine) -> DriverStatement:
        compiled: Any = statement.compile(dialect=engine.dialect)
        names = tuple(compiled.positiontup or ()) if compiled.positional else None
        fixed = {
            name: compiled.params[name]
            for name, bind in compiled.binds.items()
            if not bind.required and name in compiled.params
        }
        return cls(str(compiled), names, fixed or None)

    def params(self, values: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        """The parameters in the form the driver wants."""
        if self.fixed is not None:
            values = {**self.fixed, **values}
        if self.names is None:
            return values
        if len(self.names) == 1:
            return (values[self.names[0]],)
        return itemgetter(*self.names)(values)  # type: ignore[no-any-return]


LATE_ROUNDS = 2
"""How many times a batch takes in the callers that queued while it ran, before its COMMIT:
they share this COMMIT instead of waiting for it and the next; bounded, so that the leading
caller's own call is not held back indefinitely."""


def execute_call(cursor: Any, call: Call) -> None:
    """Run one caller's pre-compiled statements on a driver cursor, in order."""
    if call.many:
        for statement, params in call.work:
            cursor.executemany(statement.sql, params)
    else:
        for statement, params in call.work:
            cursor.execute(statement.sql, params)


def execute_together(cursor: Any, calls: list[Call]) -> None:
    """Run several callers' statements, those of consecutive callers that run the same
    statements one row each (checkpoints) as one `executemany` per statement: the same rows
    in the same order per table, for less per-statement work on the driver. (The Store's
    driver writes insert rows that do not read one another, so running statement by statement
    across callers, rather than caller by caller, changes nothing but the interleaving.)"""
    i, n = 0, len(calls)
    while i < n:
        call = calls[i]
        work = call.work
        j = i + 1
        if not call.many:
            while j < n and not calls[j].many and _same(calls[j].work, work):
                j += 1
        if j - i == 1:
            execute_call(cursor, call)
        else:
            group = calls[i:j]
            for k, (statement, _) in enumerate(work):
                cursor.executemany(statement.sql, [c.work[k][1] for c in group])
        i = j


def _same(work: Sequence[tuple[Any, Any]], other: Sequence[tuple[Any, Any]]) -> bool:
    """Whether two calls run the same statements (the same compiled objects, in order)."""
    return len(work) == len(other) and all(a[0] is b[0] for a, b in zip(work, other, strict=True))
