"""A short window of a run's trace — one step, what an agent resuming a run or a viewer reads
around it — is one statement on both backends (on PostgreSQL one message, not a cursor per
table), gives the entries the whole trace gives at those steps, and a window holding more rows
than a page is still read whole."""

from __future__ import annotations

from typing import Any

import pytest
from support.pg_proxy import PgProxy

from harness_store import Store
from harness_store.errors import RunNotFoundError
from harness_store.records import ProviderCall, StepRecord, Usage
from harness_store.store.trace_view import TRACE_PAGE, TraceView

from .test_trace import sent_statements
from .test_trace_view import a_run_of_every_kind


@pytest.fixture
def store_api() -> Any:
    """A trace view reads over a `Store` (the command's), so these tests drive `Store` only;
    `AsyncStore` has no view of its own."""
    return Store


def test_a_one_step_window_is_one_statement(store_target: str, new_store: object) -> None:
    new_store.place(store_target)  # type: ignore[attr-defined]
    proxy = PgProxy(store_target) if "://" in store_target else None
    try:
        with Store.open(proxy.url if proxy else store_target) as store:
            run = a_run_of_every_kind(store)
            whole = list(TraceView(store).entries(run))
            lean = list(TraceView(store).entries(run, results=False))
            for n in (1, 2, 3):
                list(TraceView(store).entries(run, first_step=n, last_step=n))  # compiles it
                with sent_statements(store, proxy) as sent:
                    window = list(TraceView(store).entries(run, first_step=n, last_step=n))
                assert window == [e for e in whole if e.step == n]
                assert sent() == 1, f"step {n}: {sent()} statements"
                with sent_statements(store, proxy) as sent:
                    window = list(
                        TraceView(store).entries(run, first_step=n, last_step=n, results=False)
                    )
                assert window == [e for e in lean if e.step == n]
                assert sent() == 1
            assert list(TraceView(store).entries(run, first_step=1, last_step=2)) == whole
            with pytest.raises(RunNotFoundError):
                list(TraceView(store).entries(run + 99, first_step=1, last_step=1))
    finally:
        if proxy is not None:
            proxy.close()


def test_a_short_window_holding_more_than_a_page_is_read_whole(store: Store) -> None:
    run = store.start_run("many calls at one step", "a.rs")
    usage = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
    with store.transaction():
        for attempt in range(1, TRACE_PAGE + 201):
            store.record_provider_call(run, ProviderCall(2, attempt, "p", "m", usage, 1))
    store.checkpoint_steps(run, [StepRecord(n, f"d{n}", "r") for n in (1, 2, 3)])
    whole = list(TraceView(store).entries(run))
    window = list(TraceView(store).entries(run, first_step=2, last_step=2))
    assert len(window) > TRACE_PAGE
    assert window == [e for e in whole if e.step == 2]
    assert list(TraceView(store).entries(run, first_step=1, last_step=3)) == whole
