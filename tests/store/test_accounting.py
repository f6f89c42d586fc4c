"""Token and time accounting on both backends: durable spent tokens and elapsed time, tree
aggregates over a root and its descendants, and sums past 64 bits failing alike."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from harness_store import (
    Price,
    PriceTable,
    PriceTier,
    ProviderCall,
    StepRecord,
    Store,
    Usage,
)
from harness_store.errors import IntegerOverflowError, InvalidValueError


def test_spent_tokens_and_elapsed_are_durable_reads(db: Store) -> None:
    run = db.start_run("goal", "root")
    db.checkpoint_step(run, StepRecord.new(1, "a", "ok").with_trace("p", "t", 30))
    db.checkpoint_step(run, StepRecord.new(2, "a", "ok").with_trace("p", "t", 12))
    assert db.spent_tokens(run) == 42
    time.sleep(0.02)
    elapsed = db.elapsed_secs(run)
    assert 0.015 <= elapsed < 60
    # a run with no steps has spent nothing
    assert db.spent_tokens(db.start_run("g", "f")) == 0


def test_tree_aggregate_reads_span_root_and_descendants(db: Store) -> None:
    root = db.start_run("goal", "root")
    child = db.start_child_run("sub", "root", root, 1)
    grandchild = db.start_child_run("subsub", "root", child, 2)
    outsider = db.start_run("other", "root")
    db.checkpoint_step(root, StepRecord.new(1, "a", "ok").with_trace("p", "t", 10))
    db.checkpoint_step(child, StepRecord.new(1, "a", "ok").with_trace("p", "t", 20))
    db.checkpoint_step(grandchild, StepRecord.new(1, "a", "ok").with_trace("p", "t", 5))
    db.checkpoint_step(outsider, StepRecord.new(1, "a", "ok").with_trace("p", "t", 1000))

    assert db.tree_run_ids(root) == [root, child, grandchild]
    assert db.spent_tokens_tree(root) == 35
    assert db.agent_count_tree(root) == 3
    assert db.tree_run_ids(child) == [child, grandchild]
    assert db.spent_tokens_tree(child) == 25
    assert db.agent_count_tree(child) == 2


def test_token_totals_past_64_bits_fail_alike_on_both_backends(store: Store) -> None:
    """Two steps of 2⁶³−1 tokens overflow SQLite's SUM; PostgreSQL's NUMERIC sum must fail the
    same way instead of returning a total no upstream reader can hold. The Store refuses the
    second step at the door, so another writer (as io-harness could) writes it."""
    run = store.start_run("g", "f")
    big = 2**63 - 1
    store.checkpoint_step(run, StepRecord(1, "a", "b", tokens=big))
    assert store.spent_tokens(run) == big
    with pytest.raises(IntegerOverflowError):
        store.checkpoint_step(run, StepRecord(2, "a", "b", tokens=big))
    with store.write_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
                "VALUES (:r, 2, 'a', 'b', '', '', :t)"
            ),
            {"r": run, "t": big},
        )
    with pytest.raises(IntegerOverflowError):
        store.spent_tokens(run)
    with pytest.raises(IntegerOverflowError):
        store.spent_tokens_tree(run)


# --- accounting ------------------------------------------------------------------------------


def test_cost_is_rounded_once_per_call_with_tiers_and_cache() -> None:
    prices = PriceTable.new("2026-07-29").with_(
        "m", Price(input=3_000_000, output=15_000_000, cache_read=300_000)
    )
    usage = Usage(1_000_000, 100_000, 1_100_000, cache_read_tokens=900_000)
    assert prices.cost_micros("m", usage) == 2_070_000
    assert prices.cost_micros("other", usage) is None
    tiered = PriceTable.new("x").with_("lc", Price(input=1_250_000, output=10_000_000))
    tiered = tiered.with_tiers("lc", [PriceTier(200_000, Price(input=2_500_000))])
    assert tiered.cost_micros("lc", Usage(100_000, 0, 100_000)) == 125_000
    assert tiered.cost_micros("lc", Usage(400_000, 0, 400_000)) == 1_000_000
    # a cache larger than the prompt saturates fresh input at zero
    # (only the 20 cached tokens are billed: 20 × 0.3 = 6)
    assert prices.cost_micros("m", Usage(10, 0, 10, cache_read_tokens=20)) == 6


def calls_fixture(store: Store) -> list[int]:
    runs = [store.start_run(f"r{i}", "x") for i in range(11)]
    for i, run in enumerate(runs):
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(1, 1, 2), 5))
        store.record_provider_call(
            run,
            ProviderCall(
                1,
                2,
                "a",
                "lc",
                Usage(
                    300_000 + i,
                    7,
                    9,
                    cache_read_tokens=3,
                    cache_write_tokens=2,
                    server_tool_requests=1,
                ),
                5,
            ),
        )
        store.record_provider_call(run, ProviderCall(2, 1, "a", None, Usage(4, 4, 8), 5))
        store.record_provider_call(run, ProviderCall(2, 2, "a", "m", None, 0, failure="timeout"))
    return runs


PRICES = (
    PriceTable.new("x")
    .with_("m", Price(input=333_333, output=666_667))
    .with_("lc", Price(input=1, per_server_tool_request=40))
    .with_tiers("lc", [PriceTier(300_005, Price(input=2_500_001, cache_write=7))])
)


def test_provider_calls_round_trip(store: Store) -> None:
    run = store.start_run("calls", "x")
    full = ProviderCall(
        1, 2, "anthropic", "m", Usage(2**62, 1, 2**63 - 1, 3, 4, 5, 6), 7, 8, "stop"
    )
    failed = ProviderCall(2, 1, "openai", None, None, 0, None, None, "timeout")
    store.record_provider_call(run, full)
    store.record_provider_call(run, failed)
    assert store.provider_calls(run) == [full, failed]
    assert store.provider_calls(run + 1) == []
    with pytest.raises(InvalidValueError):
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(2**63), 0))
    assert len(store.provider_calls(run)) == 2


@pytest.mark.slow_on("postgresql")
def test_spend_groupings_match_upstreams_row_by_row_pricing(store: Store) -> None:
    runs = calls_fixture(store)
    by_model = store.spend_by_model(PRICES)
    assert [s.key for s in by_model] == ["(unknown model)", "lc", "m"]
    unknown, lc, mm = by_model
    assert (unknown.calls, unknown.unpriced_calls, unknown.cost_micros) == (11, 11, 0)
    assert mm.calls == 22 and mm.unpriced_calls == 11 and mm.usage.total_tokens == 22
    expected_lc = sum(
        PRICES.cost_micros("lc", Usage(300_000 + i, 7, 9, 3, 2, 0, 1)) or 0 for i in range(11)
    )
    assert lc.cost_micros == expected_lc and lc.unpriced_calls == 0
    by_run = store.spend_by_run(PRICES)
    assert [s.key for s in by_run] == sorted(str(r) for r in runs)  # text order, as upstream
    by_day = store.spend_by_day(PRICES)
    assert len(by_day) == 1 and by_day[0].calls == 44 and len(by_day[0].key) == 10
    for name, key in (
        ("spend_by_model", lambda r, d, c: c.model or "(unknown model)"),
        ("spend_by_day", lambda r, d, c: d),
        ("spend_by_run", lambda r, d, c: str(r)),
    ):
        assert getattr(store, name)(PRICES) == store._spend_exact(PRICES, key)


def test_spend_beyond_64_bit_sums_is_still_exact(store: Store) -> None:
    big = 2**62
    for _ in range(3):  # a run each: one run's total_tokens may not pass 2⁶³−1 (the door)
        run = store.start_run("huge", "x")
        store.record_provider_call(run, ProviderCall(1, 1, "a", "m", Usage(big, 0, big), 1))
    prices = PriceTable.new("x").with_("m", Price(input=3))
    (spend,) = store.spend_by_model(prices)
    assert spend.usage.prompt_tokens == 3 * big
    assert spend.cost_micros == 3 * ((big * 3 + 500_000) // 1_000_000)


def test_the_roll_ups_over_finished_runs(store: Store) -> None:
    from harness_store import CheckpointEvent, ContextEvent, SandboxEvent

    clean = store.start_run("g", "x")
    store.finish_run(clean, "success")
    retried = store.start_run("g", "x")
    store.record_sandbox_event(SandboxEvent.gate_phase_failed(retried, 2, "test-run"))
    store.record_sandbox_event(SandboxEvent.gate_phase_failed(retried, 4, "test-run"))
    store.record_sandbox_event(SandboxEvent(retried, 5, "gate_phase_failed"))
    store.finish_run(retried, "success")
    store.finish_run(store.start_run("g", "x"), "stalled")
    store.start_run("still running", "x")
    store.record_context_event(clean, ContextEvent.served(1, "b"))
    store.record_context_event(clean, ContextEvent.replan(3, "no progress"))
    store.record_checkpoint_event(CheckpointEvent.resume(clean, 4, "after a crash"))
    assert [(t.key, t.count) for t in store.runs_by_outcome()] == [("stalled", 1), ("success", 2)]
    (day,) = store.runs_by_day()
    assert day.count == 3 and len(day.key) == 10
    first = store.first_try()
    assert (first.runs, first.succeeded, first.first_try) == (3, 2, 1)
    assert [(t.key, t.count) for t in store.gate_failures_by_phase()] == [
        ("(none)", 1),
        ("test-run", 2),
    ]
    r = store.recovery()
    assert (r.fallbacks, r.replans, r.resumes) == (1, 1, 1)
