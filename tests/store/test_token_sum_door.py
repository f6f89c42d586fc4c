"""A step whose tokens would take its run's token total past 2⁶³−1 is refused at the door with
`IntegerOverflowError`, nothing written: io-harness (SQLite's `SUM`) could not read that run's
total back. Every way the Store writes a step (one checkpoint, a batch, `record`, a leased
run's guarded checkpoint), on both backends and through both APIs; the run's total (kept by
hs6's triggers) stays exact through deletes, and a step written by another writer (`sqlite3`,
as io-harness would) that overflows the total leaves it unknown and the door still exact."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from harness_store import StepRecord, Store
from harness_store.errors import IntegerOverflowError

I64_MAX = 2**63 - 1


def step(n: int, tokens: int) -> StepRecord:
    return StepRecord(n, "d", "r", "", "", tokens)


def test_a_step_past_the_run_total_is_refused_and_nothing_written(store: Store) -> None:
    run = store.start_run("g", "f")
    store.checkpoint_step(run, step(1, I64_MAX - 10))
    store.checkpoint_step(run, step(2, 10))  # exactly the limit: readable
    assert store.spent_tokens(run) == I64_MAX
    with pytest.raises(IntegerOverflowError):
        store.checkpoint_step(run, step(3, 1))
    with pytest.raises(IntegerOverflowError):
        store.record(run, step(3, 1))
    with pytest.raises(IntegerOverflowError):
        store.checkpoint_steps(run, [step(3, 0), step(4, 1)])
    assert store.last_step(run) == 2
    assert store.spent_tokens(run) == I64_MAX
    store.checkpoint_step(run, step(3, 0))  # a step adding nothing is still taken
    other = store.start_run("g", "f")
    store.checkpoint_step(other, step(1, I64_MAX))  # each run has its own total
    assert store.spent_tokens(other) == I64_MAX


def test_a_batch_whose_own_steps_overflow_together_is_refused(store: Store) -> None:
    run = store.start_run("g", "f")
    half = 2**62
    with pytest.raises(IntegerOverflowError):
        store.checkpoint_steps(run, [step(1, half), step(2, half)])
    assert store.last_step(run) == 0
    store.checkpoint_steps(run, [step(1, half), step(2, half - 1)])
    assert store.spent_tokens(run) == I64_MAX


def test_a_leased_run_is_guarded_too(store: Store) -> None:
    run = store.start_run("g", "f")
    store.acquire_lease(run, 60)
    store.checkpoint_step(run, step(1, I64_MAX))
    with pytest.raises(IntegerOverflowError):
        store.checkpoint_step(run, step(2, 1))
    assert store.last_step(run) == 1


def test_the_total_follows_deletes(store: Store) -> None:
    run = store.start_run("g", "f")
    store.checkpoint_step(run, step(1, I64_MAX))
    with store.transaction():
        pass
    _execute(store, "DELETE FROM steps WHERE run_id = :r", r=run)
    store.checkpoint_step(run, step(1, I64_MAX))  # the deleted step's tokens count no more
    assert store.spent_tokens(run) == I64_MAX


def _execute(store: Store, sql: str, **params: Any) -> None:
    from sqlalchemy import text

    with store.write_engine.begin() as conn:
        conn.execute(text(sql), params)


def test_a_foreign_writer_past_the_total_leaves_the_door_exact(tmp_path: Any) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f")
        store.checkpoint_step(run, step(1, I64_MAX))
    with sqlite3.connect(path) as raw:  # as io-harness writes: no door of ours
        raw.execute(
            "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
            "VALUES (?, 2, 'd', 'r', '', '', 5)",
            (run,),
        )
    raw.close()
    with Store.open(path) as store:
        with pytest.raises(IntegerOverflowError):
            store.checkpoint_step(run, step(3, 0))  # the run's total is past reading already
        with sqlite3.connect(path) as raw:
            raw.execute("DELETE FROM steps WHERE run_id = ? AND step = 2", (run,))
        raw.close()
        store.checkpoint_step(run, step(3, 0))
        with pytest.raises(IntegerOverflowError):
            store.checkpoint_step(run, step(4, 1))
        assert store.spent_tokens(run) == I64_MAX


def test_a_tree_total_past_the_limit_is_refused_on_read(store: Store) -> None:
    """Not at the door (each run fits; the tree's sum would read the whole tree each write):
    its read raises the typed error, as io-harness's own sum of the tree fails."""
    root = store.start_run("g", "f")
    child = store.start_child_run("g", "f", root, 1)
    store.checkpoint_step(root, step(1, I64_MAX))
    store.checkpoint_step(child, step(1, 1))
    assert store.spent_tokens(child) == 1
    with pytest.raises(IntegerOverflowError):
        store.spent_tokens_tree(root)


def test_two_writers_of_one_run_are_checked_one_after_the_other(store_target: str) -> None:
    """The second writer waits for the first's commit and then sees its tokens: of two steps
    that fit alone but not together, one is refused, whichever commits first."""
    import threading
    import time

    with Store.open(store_target) as first, Store.open(store_target) as second:
        run = first.start_run("g", "f")
        first.checkpoint_step(run, step(1, I64_MAX - 10))
        outcome: list[BaseException | None] = []

        def other() -> None:
            try:
                second.checkpoint_step(run, step(3, 6))
                outcome.append(None)
            except BaseException as exc:  # the test reads it
                outcome.append(exc)

        with first.transaction():
            first.checkpoint_step(run, step(2, 6))
            waiting = threading.Thread(target=other)
            waiting.start()
            time.sleep(0.5)
            assert waiting.is_alive(), "the second writer waits for the first"
        waiting.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], IntegerOverflowError)
        assert first.spent_tokens(run) == I64_MAX - 4
