"""The guard a write under a run takes against a prune of that run (PostgreSQL): a child
started under a run takes its turn with the prune.

`prune_runs` locks the rows of a batch's runs (`FOR UPDATE`) before it decides and deletes
them. A write changing a run's row, or adding a row with a foreign key to it (a step), waits
for that lock by itself. A child's `runs` row names its parent without one: started under a
root the batch is deleting, it would be left running under a root that is gone, its tree split.
So `start_child_run` first takes `FOR KEY SHARE` on the parent's row, in its transaction: the
child lands before the batch reads the tree (which is then in use, and kept whole), or after the
batch committed (naming a parent that is gone, as upstream accepts). `KEY SHARE` waits only for
a deletion's lock, never for a status or lease update.

Rows of the other run-keyed tables need no hold: each batch's deletion returns the rows it
removes and the archive receives those, so a row written meanwhile is archived or left in the
store (`run_pruning`). (`record_provider_call` and `record_event` still take the hold; it is
no longer what keeps their rows.) SQLite's writers already take turns on the whole database:
nothing to take there.
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
