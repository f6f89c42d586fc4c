"""The package's read paths compile each statement once: a second call of the same read, with
other values, compiles nothing (SQLAlchemy's compiled cache, or the connector's statements kept
compiled), on both backends and both APIs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import NewStore
from sqlalchemy import select
from support.compilations import compilations

from harness_store import Edit, Price, PriceTable, ProviderCall, StepRecord, Store, Usage
from harness_store import models as m
from harness_store.dialects import backend_named
from harness_store.store.listings import Listings
from harness_store.store.step_reads import compiled, step_record
from harness_store.store.trace_view import TraceView

Read = Callable[[Store, int, int], Any]
"""A read of the store, given a run and a step number that vary between calls."""

READS: dict[str, Read] = {
    "iter_steps, paged": lambda s, run, k: list(s.iter_steps(run, page=k)),
    "steps": lambda s, run, k: s.steps(run),
    "events_after": lambda s, run, k: s.events_after(k, 10, run),
    "spend_by_run": lambda s, run, k: s.spend_by_run(PRICES),
    "arrow, of some runs": lambda s, run, k: s.arrow("steps", runs=[run, k]).to_pylist(),
}
"""A run's steps read whole and by pages, and the reads of plain rows (`spend`'s kept answers;
an Arrow export, its runs an `IN` list)."""

READER_READS: dict[str, Read] = {
    "trace_entries, one step": lambda s, run, k: list(
        TraceView(s).entries(run, first_step=k, last_step=k)
    ),
    "trace_entries, a window without results": lambda s, run, k: list(
        TraceView(s).entries(run, first_step=1, last_step=k, results=False)
    ),
    "trace_entries, whole": lambda s, run, k: list(TraceView(s).entries(run)),
    "run_header": lambda s, run, k: TraceView(s).header(run),
    "run_page": lambda s, run, k: Listings(s).run_page(limit=k),
    "run_page, filtered": lambda s, run, k: Listings(s).run_page(status="running", before=run + k),
    "count_runs": lambda s, run, k: Listings(s).count_runs(status="running"),
    "row_counts": lambda s, run, k: Listings(s).row_counts(),
    "memory_workspaces": lambda s, run, k: Listings(s).memory_workspaces(),
}
"""What `trace`, `runs` and `show` read, through the command's readers over a `Store`."""

PRICES = PriceTable.new("2026-01-01").with_("m", Price(input=1_000_000))


@pytest.mark.parametrize("read", list(READS))
def test_a_read_compiles_nothing_after_its_first_call(
    store: Store, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    compiles_once(store, monkeypatch, READS[read])


@pytest.mark.parametrize("read", list(READER_READS))
def test_a_command_s_read_compiles_nothing_after_its_first_call(
    store_target: str, new_store: NewStore, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    new_store.place(store_target)
    with Store.open(store_target) as store:
        compiles_once(store, monkeypatch, READER_READS[read])


def compiles_once(store: Store, monkeypatch: pytest.MonkeyPatch, call: Read) -> None:
    run = store.start_run("goal", "f")
    other = store.start_run("other goal", "g")
    for each in (run, other):
        store.checkpoint_steps(each, [StepRecord(n, f"d{n}", f"r{n}") for n in (1, 2, 3, 4)])
        store.record_edit(each, Edit(2, "write_file", "src/a.rs", 3, 1))
    store.memory_put("ws", "k", "v", run, 1)
    store.record_provider_call(run, ProviderCall(1, 1, "p", "m", Usage(10, 5, 15)))
    first = call(store, run, 2)  # the first call compiles what it needs
    assert call(store, other, 3) is not None
    with compilations(monkeypatch) as compiled:
        again = call(store, run, 2)
        call(store, other, 3)
    assert compiled == [], "nothing is compiled on a later call"
    assert again == first, "and the statements kept read what a first call reads"


def test_a_bulk_read_of_a_source_binds_on_the_connectors_one_path(
    store_target: str, new_store: NewStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sync's and copy's bulk reads of a source (`Backend.driver_rows`, rows as the driver's
    tuples) bind a statement as the connector's reads do, in the same kept compilations: the
    same read again, or one the connector read before, compiles nothing."""
    new_store.place(store_target)
    with Store.open(store_target) as store:
        runs = [store.start_run("goal", "f") for _ in range(2)]
        for run in runs:
            store.checkpoint_steps(run, [StepRecord(n, f"d{n}", f"r{n}") for n in (1, 2, 3)])
        backend = backend_named(store.engine.dialect.name)
        steps = m.Step.__table__

        def of_run(run: int) -> Any:
            return select(steps.c.step, steps.c.decision).where(steps.c.run_id == run)

        connector = store._connector
        with connector.read() as conn:
            first = connector.rows(conn, of_run(runs[0]))  # the connector compiles it
            with compilations(monkeypatch) as compiled:
                again = backend.driver_rows(conn, of_run(runs[0])).fetchall()
                other = backend.driver_rows(conn, of_run(runs[1])).fetchall()
        assert compiled == [], "the bulk read found the connector's compilation"
        expected = [(1, "d1"), (2, "d2"), (3, "d3")]
        assert [tuple(r) for r in again] == [tuple(r) for r in first] == expected
        assert len(other) == 3


@pytest.mark.parametrize("last", [False, True])
def test_a_step_record_read_sends_only_its_keys(store: Store, last: bool) -> None:
    """`step` and `last_step_record` send the run (and the step) alone: `LIMIT 1` is part of
    the statement, so that the plan of a statement the driver prepares (psycopg, after a few
    calls) is made knowing it, as the plan of the raw SELECT is."""
    statement = compiled(store.engine, "test step record", step_record, last)
    assert " LIMIT 1" in statement.sql  # not `LIMIT ?`, `LIMIT %(param_1)s`
