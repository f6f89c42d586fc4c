"""The provider-call door reads as much for a run of thousands of calls as for a run of ten:
one probe of the run's kept total (hs7's `hs_run_call_tokens`), not a sum over its calls.
Measured without clocks: on SQLite the virtual-machine steps of the door's INSERT (counted by
a progress handler called at each one), on PostgreSQL the rows its plan's nodes return
(`EXPLAIN (ANALYZE)`), each in a transaction rolled back."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection

from harness_store import Store
from harness_store import models as m
from harness_store.store.accounting import INSERT_CALL

SMALL, LARGE = 10, 5000


def values(run: int) -> dict[str, Any]:
    return dict(
        run_id=run, step=1, attempt=0, provider="prov", model="m1", prompt_tokens=1,
        completion_tokens=2, total_tokens=3, cache_read_tokens=0, cache_write_tokens=0,
        reasoning_tokens=0, server_tool_requests=0, latency_ms=5, ttft_ms=None,
        finish_reason="stop", failure=None,
    )  # fmt: skip


def plan_rows(node: dict[str, Any]) -> int:
    own = int(node.get("Actual Rows", 0)) * int(node.get("Actual Loops", 0))
    return own + sum(plan_rows(child) for child in node.get("Plans", ()))


def door_cost(conn: Connection, run: int) -> int:
    """What the door's INSERT of one call into `run` reads, by the backend's own count."""
    params = values(run)
    with conn.begin() as transaction:
        if conn.dialect.name == "sqlite":
            raw: Any = conn.connection.driver_connection
            steps = [0]

            def count() -> int:
                steps[0] += 1
                return 0

            raw.set_progress_handler(count, 1)
            try:
                conn.execute(INSERT_CALL, params)
            finally:
                raw.set_progress_handler(None, 1)
            cost = steps[0]
        else:
            compiled = INSERT_CALL.compile(dialect=conn.dialect)
            sql = f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}"
            plan = conn.exec_driver_sql(sql, compiled.construct_params(params)).scalar_one()
            plan = json.loads(plan) if isinstance(plan, str) else plan
            cost = plan_rows(plan[0]["Plan"])
        transaction.rollback()
    return cost


def test_the_door_costs_the_same_whatever_the_run_holds(store_target: str) -> None:
    with Store.open(store_target) as store:
        small, large = store.start_run("g", "f"), store.start_run("g", "f")
        calls = m.table_of(m.ProviderCall)
        with store.write_engine.begin() as conn:
            for run, n in ((small, SMALL), (large, LARGE)):
                conn.execute(calls.insert(), [values(run) | {"step": i} for i in range(n)])
        with store.write_engine.connect() as conn:
            door_cost(conn, large)  # the statement prepared and cached before counting
            costs = {run: door_cost(conn, run) for run in (small, large)}
        assert costs[large] <= costs[small] + 2, costs
