"""`PooledConnector`: connections borrowed from the pool per operation, and a few driver
connections kept for the hot paths (`kept`), each in autocommit (PostgreSQL, and an
`AsyncStore`'s connections on the event loop)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from itertools import count
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from ..dialects import Backend
from .base import INHERITED, Connector, Work
from .driver import DriverStatement
from .kept_connections import HeldConnections

_STREAMS = count(1)
"""Numbers naming the server-side cursors of `stream` (unique in the process)."""


class PooledConnector(Connector):
    """The pool and the kept set (see the module)."""

    def __init__(
        self, engine: Engine, backend: Backend, url: URL, *, busy_timeout: float | None = None
    ) -> None:
        super().__init__(engine, backend, url, busy_timeout=busy_timeout)
        self._kept = self._keep()

    def _keep(self) -> HeldConnections | None:
        """The set of kept driver connections (see `kept`), if the backend uses one."""
        cap = self.backend.held_connections
        if not cap:
            return None
        on_loop = bool(self.engine.dialect.is_async)  # an AsyncStore's, on the event loop
        return HeldConnections(
            self.engine,
            self.backend.connection_alive,
            cap,
            on_loop=on_loop,
            ping=self.engine.dialect.do_ping if on_loop else None,
            ping_after=self.backend.loop_ping_after,
        )

    def _close_connections(self) -> None:
        if self._kept is not None:
            self._kept.close()

    def forked(self) -> None:
        super().forked()
        if self._kept is not None:
            INHERITED.extend(self._kept.inherited())
            self._kept = self._keep()
        if not self.closed:
            self.engine.dispose(close=False)

    @contextmanager
    def _borrow(self) -> Iterator[Connection]:
        self._check_open()
        with self.engine.connect() as conn:
            yield conn

    @contextmanager
    def _maintenance_driver(self) -> Iterator[Any]:
        with self._borrow() as conn, self._queue.turn():
            raw: Any = conn.connection.dbapi_connection
            if getattr(raw, "in_transaction", False):
                raw.rollback()  # a connection just borrowed: nothing of anyone's is open on it
            yield raw

    @contextmanager
    def _own_unit(self, *, write: bool, driver: bool, alone: bool) -> Iterator[Any]:
        with self._borrow() as conn:
            if not driver:
                with self._engine_unit(conn, write) as unit:
                    yield unit
                return
            if alone:
                try:
                    with _autocommitted(conn) as pooled:
                        yield self.driver_cursor(pooled)
                except Exception as exc:
                    self.raise_typed(exc, may_have_committed=write)
                return
            pooled = conn.connection.dbapi_connection
            assert pooled is not None
            cursor = self.driver_cursor(pooled)
            try:
                if self._begin_write is not None:
                    cursor.execute(self._begin_write)
                yield cursor
            except BaseException:
                pooled.rollback()
                raise
            if write:
                self.commit(pooled.commit, pooled.rollback)
            else:
                pooled.commit()

    def _streaming_cursor(self, dbapi_connection: Any) -> Any:
        """On PostgreSQL a named (server-side) cursor, so `stream` fetches batch by batch
        instead of the whole result arriving at once."""
        if self.engine.dialect.name != "postgresql":
            return super()._streaming_cursor(dbapi_connection)
        return dbapi_connection.cursor(f"hs_stream_{next(_STREAMS)}")

    def run_driver(self, work: Work, *, many: bool = False) -> None:
        """Outside a block, on a kept connection when one is free."""
        if self._active.conn is None:
            self._check_open()
            if self._kept is not None and self._kept_write(work, many):
                return
        super().run_driver(work, many=many)

    def driver_read(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
        held = None
        if self._active.conn is None and self._kept is not None and not self.closed:
            held = self._kept.take()
        if held is None:
            return super().driver_read(statement, values)
        assert self._kept is not None
        reusable = failed = False
        try:
            rows: list[Any] = held.cursor.execute(
                statement.sql, statement.params(values)
            ).fetchall()
            reusable = True
            return rows
        except Exception as exc:
            reusable = failed = self.backend.connection_idle(held.driver)
            self.raise_on(held.driver, exc)
        finally:
            self._kept.give(held, reusable, failed=failed)

    def _kept_write(self, work: Work, many: bool) -> bool:
        """Pre-compiled statements on a kept connection: one statement in autocommit, atomic
        by itself (one round trip), or several in one transaction. A lost connection raises
        `StoreConnectionError`, saying whether the call may have committed (an autocommitted
        statement may have), and is never reused. False when no kept connection is free on
        the event loop (the call then borrows one)."""
        assert self._kept is not None
        try:
            held = self._kept.take()
        except Exception as exc:
            self.raise_typed(exc)
        if held is None:
            return False
        alone = len(work) == 1 and not many
        reusable = failed = committing = False
        try:
            cursor = held.cursor
            if alone:
                statement, params = work[0]
                cursor.execute(statement.sql, params)
            else:
                with held.transaction():
                    run = cursor.executemany if many else cursor.execute
                    for statement, params in work:
                        run(statement.sql, params)
                    committing = True  # the block's end sends COMMIT
            reusable = True
        except Exception as exc:
            reusable = failed = self.backend.connection_idle(held.driver)
            self.raise_on(held.driver, exc, may_have_committed=alone or committing)
        finally:
            self._kept.give(held, reusable, failed=failed)
        return True


@contextmanager
def _autocommitted(conn: Connection) -> Iterator[Any]:
    """A borrowed connection's driver connection in autocommit, for one statement that is its
    own transaction. Restored afterwards; a connection that cannot be restored (lost, or still
    busy after an interrupt) is discarded, so no later borrower gets it in autocommit and the
    statement's own error is the one raised."""
    pooled: Any = conn.connection.dbapi_connection
    pooled.autocommit = True
    try:
        yield pooled
    finally:
        try:
            pooled.autocommit = False
        except Exception:
            conn.invalidate()
