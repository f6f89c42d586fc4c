"""A connection lent to a borrower that begins its transactions itself: the upgrade.

Alembic's `MigrationContext` owns the connection it is handed and begins its transactions on
it (`context.begin_transaction()`); the upgrade reads first and takes the write lock only when
there is work. A `Lent` connection keeps what the connector promises for every other write:
its write transactions begin in the writers' turn, with the lock taken up front (`writing`),
and a read transaction is begun here rather than by the borrower (`reading`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine

from ..dialects import backend_for
from ..dialects.base import WRITE_DEADLINE, WRITE_TRANSACTION
from ..dialects.write_queue import WriteQueue


class Lent:
    """A lent connection and the writers' queue of its store (see the module)."""

    def __init__(self, conn: Connection, queue: WriteQueue) -> None:
        self.conn = conn
        self._queue = queue

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A read transaction on the connection, or the one already open on it."""
        if self.conn.in_transaction():
            yield self.conn
            return
        with self.conn.begin():
            yield self.conn

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """The writers' turn for the body, in which the connection's next transaction (begun
        by the borrower) takes the write lock up front (`BEGIN IMMEDIATE` on SQLite). A
        transaction already open on the connection is the caller's: it is used as it is, no
        turn taken."""
        if self.conn.in_transaction():
            yield self.conn
            return
        info = self.conn.info
        previous = info.get(WRITE_TRANSACTION)
        with self._queue.turn() as deadline:
            info[WRITE_TRANSACTION] = True
            info[WRITE_DEADLINE] = deadline
            try:
                yield self.conn
            finally:
                info[WRITE_TRANSACTION] = previous
                info.pop(WRITE_DEADLINE, None)


@contextmanager
def lend(bind: Connection | Engine) -> Iterator[Lent]:
    """`bind` lent (an engine's new connection, closed after; a caller's connection as it is),
    with the writers' queue of its store, given up after the body. Errors leave as they are:
    the borrower's caller translates them (`translated`), as Alembic's own commands show them
    untranslated."""
    queue = backend_for(bind).write_queue(bind.engine.url)
    try:
        with _connection(bind) as conn:
            yield Lent(conn, queue)
    finally:
        queue.close()


@contextmanager
def _connection(bind: Connection | Engine) -> Iterator[Connection]:
    if isinstance(bind, Connection):
        yield bind
        return
    with bind.connect() as conn:
        yield conn
