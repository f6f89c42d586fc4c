"""`repair` on a centre with roles keeps the roles' rules: the trigger functions it makes again
for hs3's spend counters and hs6/hs7's token totals still run as the owner (`SECURITY DEFINER`),
so a follower whose sync inserts provider calls and steps is not refused the tables they write."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool
from support.pg_roles import run_sql

from harness_store import Store
from harness_store.dialects.postgresql_roles import SPEND_FUNCTIONS, grant_role
from harness_store.models.sync import SYNC_METADATA

DROPPED = (
    ("hs_spend_insert", "provider_calls"),
    ("hs_run_tokens_insert", "steps"),
    ("hs_run_call_tokens_insert", "provider_calls"),
)


def invoker_functions(url: str) -> list[str]:
    """The package's trigger functions that no longer run as their owner."""
    rows = run_sql(
        url,
        "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace "
        f"AND proname IN ({', '.join(repr(n) for n in SPEND_FUNCTIONS)}) AND NOT prosecdef",
    )
    return sorted(str(name) for (name,) in rows)


def test_a_repair_keeps_the_trigger_functions_running_as_the_owner(
    pg_url: str, new_role: Callable[[], str]
) -> None:
    Store.open(pg_url).close()
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            SYNC_METADATA.create_all(conn)
            grant_role(conn, new_role(), "follower")
    finally:
        engine.dispose()
    assert invoker_functions(pg_url) == []
    for trigger, table in DROPPED:
        run_sql(pg_url, f"DROP TRIGGER {trigger} ON {table}")
    with Store.open(pg_url) as store:
        repaired = store.repair()
        assert repaired.after.healthy, repaired.after
    assert invoker_functions(pg_url) == []
