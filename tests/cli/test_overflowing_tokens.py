"""A run whose tokens pass 2⁶³−1 (the Store's `spent_tokens` raises: the database's sum overflows):
`harness-store runs` says `overflow` and prints the exact total of the same rows the Store
sums — a reply turn's provider calls, any other run's steps — on both backends."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text
from support.clirun import run_in_process
from support.rows import execute, foreign_steps

from harness_store import Store
from harness_store import models as m
from harness_store.errors import StoreError
from harness_store.records import ProviderCall, Usage

HALF = 2**62 + 1
"""Two of these pass 2⁶³−1; one fits."""


def big_call(step: int) -> ProviderCall:
    usage = Usage(prompt_tokens=HALF - 5, completion_tokens=5, total_tokens=HALF)
    return ProviderCall(step=step, provider="p", model="m", usage=usage, latency_ms=1)


def test_a_reply_turn_past_the_limit_shows_overflow_and_its_calls_total(store_target: str) -> None:
    with Store.open(store_target) as store:
        reply = store.start_run("a long reply turn", "a.md")
        store.record_provider_call(reply, big_call(0))
        # the second past the Store's door (it refuses a run's calls past 2⁶³−1): another writer's
        execute(store, m.table_of(m.ProviderCall).insert().values(
            run_id=reply, step=0, attempt=0, provider="p", model="m", prompt_tokens=HALF - 5,
            completion_tokens=5, total_tokens=HALF, latency_ms=1,
        ))  # fmt: skip
        stepped = store.start_run("big steps", "b.md")
        foreign_steps(store, stepped, HALF, HALF)  # past the Store's door: another writer's
    engine = create_engine(store_target if "://" in store_target else f"sqlite:///{store_target}")
    with engine.begin() as conn:  # what upstream 0.37+ writes for a session's reply turn
        conn.execute(text("UPDATE runs SET turn_kind = 'reply' WHERE id = :id"), {"id": reply})
    engine.dispose()
    with Store.open(store_target, read_only=True) as store:
        for run in (reply, stepped):
            with pytest.raises(StoreError):
                store.spent_tokens(run)
    ran = run_in_process("runs", store_target, "--json")
    assert ran.returncode == 0, ran.stderr
    printed = {row["run_id"]: row for row in json.loads(ran.stdout)}
    for run in (reply, stepped):
        assert printed[run]["tokens_overflow"] is True
        assert printed[run]["tokens"] == 2 * HALF
    table = run_in_process("runs", store_target)
    assert table.stdout.count("overflow") == 2
