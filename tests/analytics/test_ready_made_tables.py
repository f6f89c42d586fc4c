"""The ready-made tables equal what the Store's own getters and roll-ups answer."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from harness_store import Store
from harness_store.analytics import (
    policy_decisions,
    priced_calls,
    spend_by_model_and_day,
    step_table,
    tool_failures,
    tree_runs,
)
from harness_store.records import Price, PriceTable


def prices(store: Store) -> PriceTable:
    table = PriceTable.new("2026-08-01")
    models = sorted({m for m in store.arrow("provider_calls")["model"].to_pylist() if m})
    for n, model in enumerate(models[:-1]):  # the last model stays unpriced
        table = table.with_(model, Price(input=2_000_000 + n, output=8_000_000, cache_read=1))
    return table


@pytest.mark.slow_on("postgresql")
def test_step_table_has_every_step_with_its_tokens_tool_and_calls(written: Store) -> None:
    table = step_table(written)
    assert table.num_rows == written.arrow("steps").num_rows
    rows = table.to_pylist()
    for run in written.runs():
        mine = [r for r in rows if r["run_id"] == run]
        assert [(r["step"], r["tokens"]) for r in mine] == [
            (s.step, s.tokens) for s in written.steps(run)
        ]
        calls = written.provider_calls(run)
        for r in mine:
            of_step = [c for c in calls if c.step == r["step"]]
            assert r["calls"] == len(of_step)
            if of_step:
                assert r["latency_ms"] == sum(c.latency_ms for c in of_step)
    assert table.schema.field("started_at").type == pa.timestamp("us", tz="UTC")


def test_spend_by_model_and_day_sums_to_the_stores_spend(written: Store) -> None:
    table = prices(written)
    grouped = spend_by_model_and_day(written, table).to_pylist()
    by_model: dict[str, list[int]] = {}
    by_day: dict[str, list[int]] = {}
    for row in grouped:
        values = [row["calls"], row["total_tokens"], row["cost_micros"], row["unpriced_calls"]]
        for key, into in ((row["model"], by_model), (row["day"], by_day)):
            into[key] = [a + b for a, b in zip(into.get(key, [0] * 4), values, strict=True)]
    for spend, got in ((written.spend_by_model(table), by_model),
                       (written.spend_by_day(table), by_day)):  # fmt: skip
        assert got == {
            s.key: [s.calls, s.usage.total_tokens, s.cost_micros, s.unpriced_calls] for s in spend
        }
    calls = priced_calls(written, table)
    assert calls.num_rows == written.arrow("provider_calls").num_rows
    assert calls.schema.field("cost_micros").type == pa.int64()


def test_tool_failures_count_what_the_getters_return(written: Store) -> None:
    rows = {(r["source"], r["tool"]): r for r in tool_failures(written).to_pylist()}
    mcp: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for run in written.runs():
        for e in written.mcp_events(run):
            mcp[e.tool or ""] += 1
            failed[e.tool or ""] += e.ok is False
    assert {t: (r["calls"], r["failures"]) for (s, t), r in rows.items() if s == "mcp"} == {
        t: (mcp[t], failed[t]) for t in mcp
    }
    assert any(r["failures"] for r in rows.values())


def test_policy_decisions_by_rule(written: Store) -> None:
    table = policy_decisions(written).to_pylist()
    events = written.arrow("policy_events").to_pylist()
    assert sum(r["events"] for r in table) == len(events)
    counted = Counter((e["rule"] or "", e["decision"] or "") for e in events)
    got: Counter[tuple[str, str]] = Counter()
    for r in table:
        got[(r["rule"], r["decision"])] += r["events"]
    assert got == counted


def test_tree_runs_are_the_stores_tree_with_totals(written: Store) -> None:
    roots = [r for r in written.runs() if written.parent(r) is None]
    assert any(len(written.tree_run_ids(r)) > 1 for r in roots)
    for root in roots:
        table = tree_runs(written, root).to_pylist()
        nodes = written.tree(root)
        assert [(r["run_id"], r["parent_run_id"], r["depth"], r["status"], r["steps"],
                 r["tokens"]) for r in table] == [
            (n.run_id, n.parent_run_id, n.depth, n.status, n.steps, n.tokens) for n in nodes
        ]  # fmt: skip
        top = next(r for r in table if r["run_id"] == root)
        assert top["tree_tokens"] == written.spent_tokens_tree(root)
