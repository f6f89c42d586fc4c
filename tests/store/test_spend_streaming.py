"""Spend per run without side channels: `iter_spend_by_run` streams the records of
`spend_by_run`, neither touches Python's garbage collector (a process-wide switch another
thread may own), and a read-only Store keeps nothing and answers all the same."""

from __future__ import annotations

import dataclasses
import gc
import pickle
import sys
from typing import Any

import pytest

from harness_store import Price, PriceTable, ProviderCall, Spend, Store, Usage
from harness_store.records.accounting import spend_from_row

PRICES = PriceTable.new("x").with_("m", Price(input=3, output=5))


def calls_in_runs(store: Store, runs: int) -> list[int]:
    ids = []
    for n in range(runs):
        run = store.start_run(f"run {n}", "out.txt")
        for step in range(1, n % 3 + 2):
            usage = Usage(100 * step + n, 10, 110 * step + n)
            store.record_provider_call(run, ProviderCall(step, 1, "p", "m", usage, 1))
        ids.append(run)
    return ids


def test_iter_spend_by_run_yields_the_records_of_spend_by_run(store_target: str) -> None:
    with Store.open(store_target) as store:
        runs = calls_in_runs(store, 12)
        priced_afresh = list(store.iter_spend_by_run(PRICES))
        assert priced_afresh == store.spend_by_run(PRICES)  # the second from kept answers
        assert [s.key for s in priced_afresh] == sorted(str(r) for r in runs)
        store.record_provider_call(runs[0], ProviderCall(9, 1, "p", "m", Usage(7, 7, 14), 1))
        one_stale = store.spend_by_run(PRICES)
        assert list(store.iter_spend_by_run(PRICES)) == one_stale != priced_afresh
        assert list(store.iter_spend_by_run(PRICES, since="2000-01-01")) == one_stale


def test_spend_by_run_never_switches_the_garbage_collector(store_target: str) -> None:
    switched: list[Any] = []
    watched = (gc.disable, gc.enable)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and arg in watched:
            switched.append(arg)

    with Store.open(store_target) as store:
        calls_in_runs(store, 5)
        for name in ("spend_by_run", "iter_spend_by_run"):
            call = getattr(store, name)
            sys.setprofile(profile)
            try:
                list(call(PRICES))
            finally:
                sys.setprofile(None)
            assert switched == [], name


def test_a_read_only_store_answers_spend_and_keeps_nothing(store_target: str) -> None:
    with Store.open(store_target) as store:
        calls_in_runs(store, 4)
        expected = store._spend_exact(PRICES, lambda run_id, day, call: str(run_id))
    with Store.open(store_target, read_only=True) as reader:
        assert reader.spend_by_run(PRICES) == expected
        assert list(reader.iter_spend_by_run(PRICES)) == expected


def test_a_record_built_through_its_slots_is_the_constructors_record() -> None:
    """`spend_from_row` (how `spend_by_run` builds its records cheaply) makes exactly what
    `Spend(key, calls, Usage(...), cost, unpriced)` makes: equal, same hash and repr, still
    frozen, and it pickles and `replace`s the same."""
    values = ("42", 3, 100, 20, 120, 7, 8, 9, 1, 12_345, 1)
    built = spend_from_row(*values)
    made = Spend("42", 3, Usage(100, 20, 120, 7, 8, 9, 1), 12_345, 1)
    assert built == made and hash(built) == hash(made) and repr(built) == repr(made)
    assert type(built) is Spend and type(built.usage) is Usage
    assert pickle.loads(pickle.dumps(built)) == made
    assert dataclasses.replace(built, calls=4) == dataclasses.replace(made, calls=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.calls = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.usage.prompt_tokens = 5  # type: ignore[misc]
