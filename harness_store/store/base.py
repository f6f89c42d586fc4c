"""The Store's shared base: its connector, and the helpers every concern reads with.

A Store reaches its database only through its connector (`connector`), the one holder of its
DBAPI connections, and only through the named ways this module gives its concerns (the one
module that calls the connector): `_read()` and `_write()` give a call its unit (a SQLAlchemy
`Connection` in the call's transaction; a savepoint for a write inside a block),
`transaction()` groups calls into one block, `_snapshot()` reads a whole store at one instant,
`_run_driver` and `_driver_read` are the pre-compiled hot paths (`_fetch` and `_stream` read
plain rows in a unit), and `_maintenance()` runs what must be outside any transaction. The
checkpoint path is a collaborator built here (`checkpoints.Checkpoints`). Code above the
Store reads through `read_snapshot`, `whole_snapshot` (`store`) and `block_state` /
`restore_block_state` (here) rather than the Store's privates.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, insert, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import configure_mappers
from sqlalchemy.sql import ClauseElement

from .. import models as m
from ..connector import BlockState, Connector, SQLiteConnector, connector_for
from ..connector.driver import DriverStatement as DriverStatement
from ..dialects import Backend
from ..dialects.base import WRITE_TRANSACTION as WRITE
from ..errors import RunNotFoundError
from .checkpoints import Checkpoints
from .kept_spend import SpendKeeper
from .step_reads import compiled

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
            write=connector.write,
            run_driver=connector.run_driver,
            read_only=read_only,
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

    # --- the Store's ways to its database: the only calls to its connector ---------------

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

    def _read(self) -> Any:
        """A SQLAlchemy connection in the call's read transaction (the open block's, inside
        `transaction()`)."""
        return self._connector.read()

    def _write(self) -> Any:
        """A SQLAlchemy connection in the call's write transaction (a savepoint of the open
        block, inside `transaction()`)."""
        return self._connector.write()

    def _snapshot(self, *, typed: bool = False) -> AbstractContextManager[Connection]:
        """One read transaction in which every statement sees the same instant (a whole
        store read at once); `typed`, with driver errors raised as typed `StoreError`s."""
        if not typed:
            return self._connector.snapshot()
        return _typed(self._connector)

    def _in_block(self) -> bool:
        """Whether this thread (or task) has a `transaction()` block open."""
        return self._connector.in_block()

    def _may_write(self) -> bool:
        """Whether a write may run here (not inside a read-only transaction)."""
        return self._connector.may_write()

    def _run_driver(
        self, work: Sequence[tuple[DriverStatement, Any]], *, many: bool = False
    ) -> None:
        """Pre-compiled statements in one write transaction (see `Connector.run_driver`)."""
        self._connector.run_driver(work, many=many)

    def _driver_read(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
        """One pre-compiled SELECT as its own snapshot (see `Connector.driver_read`)."""
        return self._connector.driver_read(statement, values)

    def _fetch(self, conn: Connection, statement: ClauseElement) -> list[Any]:
        """The rows of `statement` in `conn`'s transaction as plain tuples, read on its driver
        connection (no SQLAlchemy `Row` per row)."""
        return self._connector.rows(conn, statement)

    def _stream(
        self,
        conn: Connection,
        statement: ClauseElement,
        rows: int,
        values: Mapping[str, Any] | None = None,
    ) -> Iterator[Sequence[Any]]:
        """The rows of `statement` in `conn`'s transaction, `rows` at a time (a server-side
        cursor on PostgreSQL): constant memory however many there are. `values`: the
        parameters of a statement built once (compiled once, see `Connector.stream`)."""
        return self._connector.stream(conn, statement, rows, values)

    def _maintenance(self) -> AbstractContextManager[Any]:
        """A driver connection outside any transaction (`VACUUM`, the WAL switch);
        `TransactionOpenError` inside a block."""
        return self._connector.outside_transaction()

    def _released(self) -> AbstractContextManager[None]:
        """The Store's connections given back for the body (an upgrade in place)."""
        return self._connector.released()

    def _point(self, name: str, build: Any, *shape: Any, **values: Any) -> list[Any]:
        """The rows of the point read `name` with its parameters `values`, built by
        `build(*shape)` and compiled once per dialect (see `step_reads`)."""
        return self._driver_read(compiled(self._engine, name, build, *shape), values)

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


@contextmanager
def _typed(connector: Connector) -> Iterator[Connection]:
    with connector.translated(), connector.snapshot() as conn:
        yield conn


def block_state(store: StoreBase) -> BlockState:
    """What the calling context has open on `store` (the open `transaction()` block), to put
    back with `restore_block_state` once a block run elsewhere ends (`AsyncStore`)."""
    return store._connector.block_state()


def restore_block_state(store: StoreBase, state: BlockState) -> None:
    """Put back what `block_state` returned in the calling context."""
    store._connector.restore_block_state(state)


def _after_fork(ref: weakref.ref[StoreBase]) -> None:
    """In a child after `fork()`: the parent's connections are the parent's; the connector
    drops them (never closing them) and takes fresh ones."""
    store = ref()
    if store is not None:
        store._connector.forked()
