"""A store holding one foreign value, for the tests of what every path does with it: one
finished run of one step with a tool call, a memory entry and a lease, written by the Store,
then the value written into a row with `sqlite3` directly, as a foreign writer leaves it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from harness_store import StepRecord, Store

from .new_stores import new_sqlite_store


def foreign_store(path: Path, table: str, column: str, sql: str) -> int:
    """The store at `path`, the SQL value `sql` written into `table.column` of the run's row
    there (the run itself for `runs`); the run's id. A new store starts as a copy of the
    process's new one (`new_sqlite_store`)."""
    with Store.open(new_sqlite_store(path), backup=False) as store:
        run = store.start_run("goal", "plan.toml")
        store.checkpoint_step(
            run, StepRecord(1, "decide", "result").with_trace("prompt", 'read_file:{"n":1}', 2)
        )
        store.memory_put("ws", "key", "remembered", run, 1)
        store.acquire_lease(run, 60)
        store.finish_run(run, "success")
    with closing(sqlite3.connect(path)) as conn, conn:
        key = "id" if table == "runs" else "run_id"
        conn.execute(f"UPDATE {table} SET {column} = {sql} WHERE {key} = ?", [run])
    return run
