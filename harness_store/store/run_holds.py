"""A write naming a run takes its turn with a prune of that run (PostgreSQL).

`prune_runs` locks the rows of a batch's runs (`FOR UPDATE`) before it copies and deletes them.
A write into a run-keyed table with a foreign key (a step) waits for that lock by itself; the
tables without one (`provider_calls`, `policy_events`, a child's `runs` row) would not, and a
row committed between a batch's copy and its delete would be in neither the store nor the
archive. So those writes first take `FOR KEY SHARE` on the run's row, in their transaction:
the write lands before the batch reads the run (and goes with it, copied), or after the
batch committed (and stays in the store, naming a run that is gone, as upstream accepts such
a write). `KEY SHARE` waits only for a deletion's lock, never for a status or lease update.
SQLite's writers already take turns on the whole database: nothing to take there.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import bindparam, select

from .. import models as m


@cache
def _hold_statement() -> Any:
    run = m.Run
    return (
        select(run.id).where(run.id == bindparam("run")).with_for_update(read=True, key_share=True)
    )


def hold_run(conn: Any, backend: Any, run_id: object) -> None:
    """Take `FOR KEY SHARE` on the row of `run_id` until the commit (PostgreSQL; nothing on
    SQLite): a prune's batch holding that run is waited for. A run that is not there is no
    error (upstream writes rows of any run id)."""
    if not backend.one_connection:
        conn.execute(_hold_statement(), {"run": run_id})
