"""Revision hs7 (each run's total of its provider calls' tokens, `hs_run_call_tokens`): the
upgrade from hs6 fills the totals from the calls already stored, whoever wrote them (NULL for
a run with a call no integer of at least 0), and its triggers keep them from then on; the downgrade
drops the table and its triggers, leaving hs6's; `alembic check` finds nothing to do. On both
backends."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, inspect, text

from harness_store import Store
from harness_store.dialects import backend_named
from harness_store.records.health import FindingKind
from harness_store.releases import HEAD
from harness_store.store.check_schema import CALL_TOKENS_TRIGGERS

from .test_own_schema_alembic import x_config

CALL = (
    "INSERT INTO provider_calls (run_id, step, attempt, provider, total_tokens, latency_ms) "
    "VALUES ({run}, 1, 0, 'prov', {total}, 1)"
)


def test_the_upgrade_fills_the_totals_and_the_downgrade_drops_them(store_target: str) -> None:
    with Store.open(store_target) as store:
        runs = [store.start_run("g", "f") for _ in range(3)]
        url = store.url
    config = x_config(f"db={store_target}")
    assert HEAD == "hs7"
    command.downgrade(config, "hs6")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            assert "hs_run_call_tokens" not in inspect(conn).get_table_names()
            for table in CALL_TOKENS_TRIGGERS:
                names = backend_named(conn.dialect.name).trigger_names(conn, table)
                assert not {n for n in names if n.startswith("hs_run_call_tokens")}
            assert "hs_run_tokens" in inspect(conn).get_table_names()  # hs6's stay
            for run, totals in zip(runs, ((3, 4, None), (-1, 5), ()), strict=True):
                for total in totals:
                    value = "NULL" if total is None else total
                    conn.execute(text(CALL.format(run=run, total=value)))
        command.upgrade(config, "head")
        with engine.begin() as conn:
            kept = dict(conn.execute(text("SELECT run_id, total FROM hs_run_call_tokens")).all())
            assert kept == {runs[0]: 7, runs[1]: None}  # a run without calls has no row
            conn.execute(text(CALL.format(run=runs[0], total=5)))  # the triggers keep it
            conn.execute(text(f"DELETE FROM provider_calls WHERE run_id = {runs[0]} "
                              "AND total_tokens = 3"))  # fmt: skip
            total = "SELECT total FROM hs_run_call_tokens WHERE run_id = :r"
            assert conn.execute(text(total), {"r": runs[0]}).scalar_one() == 9
        command.check(config)  # raises on any difference
        with Store.open(store_target) as store:  # the negative call is a value finding
            assert not store.check().of(FindingKind.RUN_TOKENS)
    finally:
        engine.dispose()
