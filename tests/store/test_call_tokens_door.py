"""A provider call whose `total_tokens` would take its run's sum of them past 2⁶³−1 is refused
at the door with `IntegerOverflowError`, nothing written: io-harness sums a reply turn's calls
with SQLite's `SUM` (`spent_tokens`), which could not read that run back. On both backends and
through both APIs; a call with no usage adds nothing and is always taken; a run whose calls
another writer (`sqlite3`, as io-harness would) already took past the limit takes no more."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest

from harness_store import Store
from harness_store.errors import IntegerOverflowError
from harness_store.records import ProviderCall, Usage

I64_MAX = 2**63 - 1


def call(step: int, total: int | None) -> ProviderCall:
    usage = None if total is None else Usage(0, 0, total)
    return ProviderCall(step, 0, "prov", "m1", usage, 5, None, None, None)


def reply_turn(store: Store, run: int) -> None:
    """Make `run` a reply turn (0.37), whose spend io-harness sums from its calls."""
    from sqlalchemy import text

    with store.write_engine.begin() as conn:
        conn.execute(text("UPDATE runs SET turn_kind = 'reply' WHERE id = :r"), {"r": run})


def test_a_call_past_the_run_total_is_refused_and_nothing_written(store: Store) -> None:
    run = store.start_run("g", "f")
    reply_turn(store, run)
    store.record_provider_call(run, call(1, I64_MAX - 10))
    store.record_provider_call(run, call(1, 10))  # exactly the limit: readable
    assert store.spent_tokens(run) == I64_MAX
    with pytest.raises(IntegerOverflowError, match=f"run {run}"):
        store.record_provider_call(run, call(2, 1))
    assert len(store.provider_calls(run)) == 2
    assert store.spent_tokens(run) == I64_MAX
    store.record_provider_call(run, call(2, 0))  # a call adding nothing is still taken
    store.record_provider_call(run, call(2, None))  # nor does one with no usage
    assert len(store.provider_calls(run)) == 4
    other = store.start_run("g", "f")
    store.record_provider_call(other, call(1, I64_MAX))  # each run has its own sum
    assert [c.usage.total_tokens for c in store.provider_calls(other) if c.usage] == [I64_MAX]


def test_a_foreign_writer_past_the_sum_leaves_the_door_shut(tmp_path: Any) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f")
        store.record_provider_call(run, call(1, I64_MAX))
    with sqlite3.connect(path) as raw:  # as io-harness writes: no door of ours
        raw.execute(
            "INSERT INTO provider_calls (run_id, step, attempt, provider, total_tokens, "
            "latency_ms) VALUES (?, 2, 0, 'prov', 5, 1)",
            (run,),
        )
    raw.close()
    with Store.open(path) as store:
        with pytest.raises(IntegerOverflowError):
            store.record_provider_call(run, call(3, 0))  # past reading already
        store.record_provider_call(run, call(3, None))  # no usage: nothing summed
        assert len(store.provider_calls(run)) == 3


def test_two_writers_of_one_run_are_checked_one_after_the_other(store_target: str) -> None:
    """The second writer waits for the first's commit and then sees its call: of two calls
    that fit alone but not together, one is refused."""
    with Store.open(store_target) as first, Store.open(store_target) as second:
        run = first.start_run("g", "f")
        first.record_provider_call(run, call(1, I64_MAX - 10))
        outcome: list[BaseException | None] = []

        def other() -> None:
            try:
                second.record_provider_call(run, call(3, 6))
                outcome.append(None)
            except BaseException as exc:  # the test reads it
                outcome.append(exc)

        with first.transaction():
            first.record_provider_call(run, call(2, 6))
            waiting = threading.Thread(target=other)
            waiting.start()
            time.sleep(0.5)
            assert waiting.is_alive(), "the second writer waits for the first"
        waiting.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], IntegerOverflowError), outcome
        assert len(first.provider_calls(run)) == 2
