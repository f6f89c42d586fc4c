"""How a Core statement becomes the SQL and parameters a driver takes: each engine's one
`StatementBinder`, which the connector's reads and a backend's bulk reads bind through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from sqlalchemy import Select, TableClause
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement

from ..errors import StatementRefusedError

if TYPE_CHECKING:
    from .base import Backend

STATEMENTS_KEPT = 500
"""How many compiled statements a binder keeps of each kind (as many as SQLAlchemy's own
compiled cache keeps by default); past it they are compiled afresh."""


class StatementBinder:
    """How a Core statement becomes the SQL and parameters a driver takes, for one engine's
    dialect: the one way the package's reads on a driver connection bind (the connector's
    `rows` and `stream`, a backend's `driver_rows`), each statement compiled once.

    A statement given with its `values` was built once by its reader (its parameters named)
    and is found by what it is, nothing computed from it per call; any other is found by
    SQLAlchemy's cache key of it (its structure, without its values), whose values are the
    call's parameters, as SQLAlchemy's own execution does. Only `IN` lists are expanded per
    call; a statement SQLAlchemy cannot cache is compiled for its call alone. Parameters are
    bound, never inlined, and a statement over the driver's parameter limit is refused before
    it is sent (`StatementRefusedError`)."""

    def __init__(self, dialect: Dialect, backend: Backend) -> None:
        self.dialect = dialect
        self.limit = backend.statement_parameters
        self.backend_name = backend.name
        self._compiled: dict[Any, Any] = {}
        """Statements compiled, by SQLAlchemy's cache key."""
        self._built_once: dict[int, tuple[ClauseElement, Any]] = {}
        """The statements readers built once, compiled, by identity (each kept beside its
        compiled form, so that its id is never another's)."""

    def bound(
        self, statement: ClauseElement, values: Mapping[str, Any] | None = None
    ) -> tuple[str, Any]:
        """`statement`'s SQL for this dialect and its parameters, bound (an `IN` list's
        values each a parameter of its own)."""
        if values is not None:
            kept = self._built_once.get(id(statement))
            if kept is None or kept[0] is not statement:
                kept = (statement, statement.compile(dialect=self.dialect))
                if len(self._built_once) >= STATEMENTS_KEPT:
                    self._built_once.clear()
                self._built_once[id(statement)] = kept
            compiled: Any = kept[1]
            bound = compiled.construct_params(values, escape_names=False)
        else:
            key = statement._generate_cache_key()
            compiled = None if key is None else self._compiled.get(key.key)
            if compiled is None:
                compiled = statement.compile(dialect=self.dialect, cache_key=key)
                if key is not None:
                    if len(self._compiled) >= STATEMENTS_KEPT:
                        self._compiled.clear()
                    self._compiled[key.key] = compiled
            extracted = None if key is None else key.bindparams
            bound = compiled.construct_params(extracted_parameters=extracted, escape_names=False)
        expanded = compiled.construct_expanded_state(bound)
        params = expanded.positional_parameters if compiled.positional else expanded.parameters
        if self.limit is not None and len(params) > self.limit:
            raise StatementRefusedError(
                f"a statement reading {_tables_of(statement)} would send {len(params):,} "
                f"parameters, and {self.backend_name}'s driver sends at most {self.limit:,}; "
                "it was not sent, nothing changed"
            )
        return expanded.statement, params


def _tables_of(statement: ClauseElement) -> str:
    """The tables a statement reads, named for an error (or "its tables")."""
    froms = statement.get_final_froms() if isinstance(statement, Select) else []
    names = [f.name for f in froms if isinstance(f, TableClause)]
    return ", ".join(names) if names else "its tables"


_BINDERS: WeakKeyDictionary[Dialect, StatementBinder] = WeakKeyDictionary()
"""Each engine's binder, by its dialect (one per engine), gone with it."""


def binder_for(dialect: Dialect, backend: Backend) -> StatementBinder:
    """The binder of the engine whose dialect is `dialect` (made on first use)."""
    binder = _BINDERS.get(dialect)
    if binder is None:
        binder = _BINDERS.setdefault(dialect, StatementBinder(dialect, backend))
    return binder
