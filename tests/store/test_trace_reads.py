"""Reads: `steps()` is one snapshot however many pages a run has; bad paging is a typed error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from harness_store import StepRecord, Store
from harness_store.errors import InvalidValueError
from harness_store.store.runs import STEP_PAGE


def test_steps_across_pages_is_one_snapshot(
    store_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store.open(store_target) as store, Store.open(store_target) as other:
        run = store.start_run("long", "out.txt")
        count = STEP_PAGE + 1
        store.checkpoint_steps(run, [StepRecord.new(n, "d", "r") for n in range(1, count + 1)])
        original = store._read
        reads = 0

        @contextmanager
        def tx_then_write() -> Iterator[Any]:
            nonlocal reads
            with original() as conn:
                yield conn
            reads += 1
            if reads == 1:  # another writer commits once the first read is done
                other.checkpoint_step(run, StepRecord.new(count + 1, "late", "r"))

        monkeypatch.setattr(store, "_read", tx_then_write)
        assert [s.step for s in store.steps(run)] == list(range(1, count + 1))
        monkeypatch.undo()
        assert len(store.steps(run)) == count + 1


@pytest.mark.parametrize("page", [0, -1])
@pytest.mark.slow_on("postgresql")
def test_iter_steps_with_no_page_size_is_a_typed_error(store: Store, page: int) -> None:
    run = store.start_run("goal", "out.txt")
    with pytest.raises(InvalidValueError):
        list(store.iter_steps(run, page=page))
