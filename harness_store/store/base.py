"""The Store's shared base: its connector, and the helpers every concern reads with.

A Store reaches its database only through its connector (`connector`), the one holder of its
DBAPI connections: `_read()` and `_write()` give a call its unit (a SQLAlchemy `Connection` in
the call's transaction; a savepoint for a write inside a block), `transaction()` groups calls
into one block, `_run_driver` and `_driver_read` are the pre-compiled hot paths, and
maintenance that must run outside any transaction goes through `connector.maintenance()`.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from sqlalchemy import Engine, insert, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import configure_mappers
from sqlalchemy.sql import ClauseElement

from .. import models as m
from ..dialects import Backend
from ..dialects.sqlite import WRITE
from ..errors import RunNotFoundError
from .checkpoints import Checkpoints
from .connector import Connector, SQLiteConnector, connector_for
from .driver import DriverStatement as DriverStatement
from .point_reads import compiled
from .spend_keeper import SpendKeeper

T = TypeVar("T")


class StoreBase:
    """The connector and the read helpers; the concerns (runs, events, trees, memory) build
    on it."""

    def __init__(
        self,
        engine: Engine,
        backend: Backend,
        url: URL,
        *,
        busy_timeout: float | None = None,
        connector: Connector | None = None,
        read_only: bool = False,
        spend_keeper: StoreBase | None = None,
    ) -> None:
        self._engine = engine
        self._backend = backend
        self.url = url
        self._connector = connector or connector_for(
            engine, backend, url, busy_timeout=busy_timeout
        )
        connector = self._connector
        self._checkpoints = Checkpoints(
            engine,
            backend,
            write=lambda: connector.unit(write=True),
            run_driver=connector.run_driver,
        )
        """The checkpoint path: this handle's leases, staged turns, and the checkpoint's
        statements (`checkpoints`)."""
        self._spend_keeper = SpendKeeper(spend_keeper, read_only=read_only)
        self._columns_seen: dict[str, frozenset[str]] = {}
        # Set the models' mappers up now (once a process, ~0.1 s for 37 tables), not inside
        # the first write that names a model, whose latency a caller does not expect.
        configure_mappers()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine behind this Store, for reading through ORM sessions over the
        models. On SQLite its transactions begin deferred: a session that reads and then
        writes fails at once if another process wrote in between — write through
        `write_engine`."""
        return self._engine

    @property
    def write_engine(self) -> Engine:
        """The Store's engine with write transactions: on SQLite each transaction begins with
        `BEGIN IMMEDIATE`, so an ORM session that reads then writes waits for other writers
        (up to the busy timeout) instead of failing on a stale read. Same as `engine` on
        PostgreSQL. Bind sessions that write to it: `Session(store.write_engine)`."""
        return self._engine.execution_options(**{WRITE: True})

    @property
    def backend(self) -> Backend:
        """The backend ("sqlite" or "postgresql") this Store speaks through."""
        return self._backend

    @property
    def _closed(self) -> bool:
        return self._connector.closed

    @property
    def _raw(self) -> Any:
        """The SQLite driver connection the Store holds (None on a pooled backend)."""
        connector = self._connector
        return connector.raw if isinstance(connector, SQLiteConnector) else None

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Release the Store's connections. Idempotent."""
        self._connector.close()

    def __enter__(self) -> StoreBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- transactions: delegates to the connector ----------------------------------------

    def _tx(self, *, write: bool) -> Any:
        """A SQLAlchemy connection inside the call's transaction (see `Connector.unit`)."""
        return self._connector.unit(write=write)

    def transaction(self) -> AbstractContextManager[None]:
        """Group several Store writes into one atomic transaction: all of them, or none.

        Each Store call inside the block is atomic on its own: one that fails leaves nothing
        of itself, and when the caller catches its error the other calls of the block are
        still committed at the end. An exception leaving the block rolls the whole block
        back. A nested `transaction()` is a savepoint: all of its calls, or none of them, and
        the outer block goes on. A transaction that cannot commit (its connection was lost,
        the server aborted it) raises instead of ending quietly. Maintenance that cannot run
        in a transaction (`compact`) raises `TransactionOpenError` inside a block.

        On SQLite the write lock is taken when the block starts. Store calls made inside the
        block by the same thread join it; other threads wait for it to finish.
        """
        return self._connector.transaction()

    def _write(self) -> Any:
        return self._tx(write=True)

    def _read(self) -> Any:
        return self._tx(write=False)

    def _run_driver(
        self, work: Sequence[tuple[DriverStatement, Any]], *, many: bool = False
    ) -> None:
        """Pre-compiled statements in one write transaction (see `Connector.run_driver`)."""
        self._connector.run_driver(work, many=many)

    def _driver_read(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
        """One pre-compiled SELECT as its own snapshot (see `Connector.driver_read`)."""
        return self._connector.driver_read(statement, values)

    def _point(self, name: str, build: Any, *shape: Any, **values: Any) -> list[Any]:
        """The rows of the point read `name` with its parameters `values`, built by
        `build(*shape)` and compiled once per dialect (see `point_reads`)."""
        return self._driver_read(compiled(self._engine, name, build, *shape), values)

    def _translated(self) -> AbstractContextManager[None]:
        """Driver errors raised in the body as typed `StoreError`s."""
        return self._connector.translated()

    def _run_column(self, run_id: int, column: Any, *, missing_ok: bool) -> Any:
        statement = select(column).where(m.Run.id == run_id)
        with self._read() as conn:
            row = conn.execute(statement).first()
        if row is None:
            if missing_ok:
                return None
            raise RunNotFoundError(f"no run with id {run_id} in the store")
        return row[0]

    def _has_columns(self, table: str, *columns: str) -> bool:
        """Whether the store's `table` has every one of `columns`. A read-only Store may read a
        store of any release from 0.13 on, which lacks later columns; the answer is cached."""
        known = self._columns_seen.get(table)
        if known is None:
            with self._read() as conn:
                known = frozenset(c["name"] for c in inspect(conn).get_columns(table))
            self._columns_seen[table] = known
        return known.issuperset(columns)

    def _scalar(self, statement: ClauseElement, params: Mapping[str, Any] | None = None) -> Any:
        with self._read() as conn:
            return conn.execute(statement, params or {}).scalar()

    def _rows(
        self,
        statement: ClauseElement,
        make: Callable[..., T],
        params: Mapping[str, Any] | None = None,
    ) -> list[T]:
        with self._read() as conn:
            return [make(*row) for row in conn.execute(statement, params or {})]

    def _append(self, model: type[m.Base], **values: object) -> None:
        """Append one row to an ordered log table, atomically."""
        with self._write() as conn:
            conn.execute(insert(model).values(**values))


def _after_fork(ref: weakref.ref[StoreBase]) -> None:
    """In a child after `fork()`: the parent's connections are the parent's; the connector
    drops them (never closing them) and takes fresh ones."""
    store = ref()
    if store is not None:
        store._connector.forked()
