"""The work each write transaction of a Store did, counted by the database itself: on
PostgreSQL the rows of a table the transaction read (`pg_stat_xact_user_tables`), on SQLite the
virtual machine's steps (a progress handler counting every 100)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from harness_store import Store
from harness_store.dialects.base import WRITE_TRANSACTION


@contextmanager
def work_per_write(store: Store, table: str) -> Iterator[list[int]]:
    """The work each write transaction of `store` did (on PostgreSQL: rows of `table` read),
    appended at its commit."""
    done: list[int] = []
    engine = store.engine
    if engine.dialect.name == "postgresql":
        # The backend's counts since it last reported them (which may span transactions):
        # read at each write transaction's start and commit, in it. Only a write's start: a
        # read may set its isolation first, which a statement before it would refuse. The
        # connector marks a connection's next transaction a write before it begins.
        read = (
            "SELECT COALESCE(SUM(seq_tup_read), 0) + COALESCE(SUM(idx_tup_fetch), 0) "
            f"FROM pg_stat_xact_user_tables WHERE relname = '{table}'"
        )
        start: dict[int, int] = {}

        def counted(conn: Any) -> int:
            with conn.connection.dbapi_connection.cursor() as cursor:
                return int(cursor.execute(read).fetchone()[0])

        def at_begin_pg(conn: Any) -> None:
            if conn.info.get(WRITE_TRANSACTION):
                start[id(conn)] = counted(conn)

        def at_commit(conn: Any) -> None:
            if id(conn) in start:
                done.append(counted(conn) - start.pop(id(conn)))

        event.listen(engine, "begin", at_begin_pg)
        event.listen(engine, "commit", at_commit)
        try:
            yield done
        finally:
            event.remove(engine, "begin", at_begin_pg)
            event.remove(engine, "commit", at_commit)
        return
    raw = store._raw
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    def at_begin(conn: Any) -> None:
        steps[0] = 0

    def at_commit_sqlite(conn: Any) -> None:
        if conn.info.get(WRITE_TRANSACTION):
            done.append(steps[0])

    raw.set_progress_handler(tick, 100)
    event.listen(engine, "begin", at_begin)
    event.listen(engine, "commit", at_commit_sqlite)
    try:
        yield done
    finally:
        event.remove(engine, "begin", at_begin)
        event.remove(engine, "commit", at_commit_sqlite)
        raw.set_progress_handler(None, 100)
