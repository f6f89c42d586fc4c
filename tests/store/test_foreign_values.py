"""Values another writer left that io-harness could not read back (Infinity or text in an
integer column, a lease whose expiry no stamp can hold): every read path that meets one raises
`UnreadableValueError` naming the row (table, row id, column, what is wrong), never a raw
driver or Python error.

The values are written as a foreign writer leaves them: with `sqlite3` itself on a SQLite file,
with plain SQL on PostgreSQL (whose integer columns hold no text and no Infinity, so those
cases are SQLite's alone).
"""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import create_engine, text

from harness_store import Store
from harness_store.errors import UnreadableValueError


def foreign(target: str, *statements: str) -> None:
    """Run `statements` on the store as another writer would: `sqlite3` on a SQLite file, the
    server's own SQL on PostgreSQL; committed together."""
    if "://" not in target:
        with sqlite3.connect(target) as conn:
            for statement in statements:
                conn.execute(statement)
        conn.close()
        return
    engine = create_engine(target)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


# --- leases --------------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [2**40, 2**63 - 1, -1])
def test_a_foreign_lease_whose_expiry_no_stamp_can_hold_reads_as_unreadable(
    store: Store, store_target: str, ttl: int
) -> None:
    """Before: a raw OverflowError from `run_lease` and from another owner's
    `acquire_lease`. io-harness's own read of the row fails too (its `strftime` of the expiry
    is NULL past the year 9999, and for a negative ttl, which is no `'+N seconds'`)."""
    run = store.start_run("leased", "x")
    store.acquire_lease(run, 60)
    foreign(store_target, f"UPDATE run_leases SET ttl_secs = {ttl} WHERE run_id = {run}")
    named = rf"run_leases.*run_id {run}.*ttl_secs"
    with pytest.raises(UnreadableValueError, match=named):
        store.run_lease(run)
    with Store.open(store_target) as other, pytest.raises(UnreadableValueError, match=named):
        other.acquire_lease(run, 60)


def test_a_foreign_lease_at_the_largest_generation_is_not_taken_over(
    store: Store, store_target: str
) -> None:
    """A take-over raises the generation by one: from 2⁶³−1 SQLite would write a REAL (which
    no later read takes) and PostgreSQL refuse with a raw "bigint out of range". Refused
    typed, naming the row, and nothing is written."""
    run = store.start_run("leased", "x")
    store.acquire_lease(run, 0)  # lapsed at once: any other owner may take it over
    foreign(store_target, f"UPDATE run_leases SET generation = {2**63 - 1} WHERE run_id = {run}")
    before = store.run_lease(run)
    named = rf"run_leases.*run_id {run}.*generation"
    with Store.open(store_target) as other, pytest.raises(UnreadableValueError, match=named):
        other.acquire_lease(run, 60)
    assert store.run_lease(run) == before
