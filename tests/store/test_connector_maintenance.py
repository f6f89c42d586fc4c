"""Maintenance that must run outside a transaction (`compact`'s VACUUM) refuses, typed and
having done nothing, inside an open `transaction()` block, on both backends and through both
APIs; the block it was refused in then commits or rolls back as if it had not been called."""

from __future__ import annotations

from typing import Any

import pytest

from harness_store import StepRecord, Store
from harness_store.errors import StoreError, TransactionOpenError


class Boom(Exception):
    """An error of the caller's own, raised inside a block."""


def test_compact_inside_a_block_the_caller_aborts_leaves_nothing_of_the_block(
    store: Any,
) -> None:
    with pytest.raises(Boom), store.transaction():
        run = store.start_run("goal", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "step 1", "ok"))
        with pytest.raises(TransactionOpenError):
            store.compact()
        raise Boom
    assert store.runs() == []


def test_compact_refused_inside_a_block_leaves_the_block_going_on(store: Any) -> None:
    with store.transaction():
        run = store.start_run("goal", "out.txt")
        with pytest.raises(TransactionOpenError) as refused:
            store.compact()
        store.checkpoint_step(run, StepRecord.new(1, "step 1", "ok"))
    assert isinstance(refused.value, StoreError)
    assert store.runs() == [run]
    assert [s.step for s in store.steps(run)] == [1]


def test_compact_refused_in_a_nested_block_and_an_uncaught_refusal_rolls_back(
    store: Any,
) -> None:
    with pytest.raises(TransactionOpenError), store.transaction():
        store.start_run("outer", "out.txt")
        with store.transaction():
            store.start_run("inner", "out.txt")
            store.compact()
    assert store.runs() == []


def test_compact_outside_a_block_still_runs(store: Any) -> None:
    run = store.start_run("goal", "out.txt")
    assert store.compact() >= 0
    assert store.runs() == [run]


def test_the_connectors_maintenance_refuses_inside_a_block_before_touching_anything(
    store_target: str,
) -> None:
    """The one way to a connection outside any transaction (VACUUM, the switch to WAL at
    open) refuses inside a block: its body never runs, so nothing can commit the block."""
    ran: list[object] = []
    with Store.open(store_target) as store:
        with pytest.raises(Boom), store.transaction():
            store.start_run("goal", "out.txt")
            with (
                pytest.raises(TransactionOpenError),
                store._connector.outside_transaction() as driver,
            ):
                ran.append(driver)
            raise Boom
        assert ran == []
        assert store.runs() == []
        with (
            store._connector.outside_transaction() as driver
        ):  # outside a block: a driver connection
            ran.append(driver)
        assert len(ran) == 1
