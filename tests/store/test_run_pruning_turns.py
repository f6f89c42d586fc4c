"""A prune leaves the store to its writers between two batches for as long as the batch held
it, as `compact` and `repair` do between their slices (`store_space.step_aside`): so a live
writer beside a prune of a big store gets its turn after at most one batch, however many
writers' retries fit in a fixed pause."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool

from harness_store import StepRecord, Store


@contextmanager
def write_transactions(path: Path) -> Iterator[list[tuple[float, float]]]:
    """The (began, committed) times, monotonic, of each transaction that deleted rows on a
    connection to the file `path` while the body runs."""
    spans: list[tuple[float, float]] = []
    resolved = str(path.resolve())
    began = [0.0]
    deleted = [False]

    def statement(sql: str) -> None:
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if word == "BEGIN":
            began[0], deleted[0] = time.monotonic(), False
        elif word == "DELETE":
            deleted[0] = True
        elif word == "COMMIT" and deleted[0]:
            spans.append((began[0], time.monotonic()))

    def watch(raw: Any, *_: Any) -> None:
        if isinstance(raw, sqlite3.Connection):
            files = [str(r[2]) for r in raw.execute("PRAGMA database_list")]
            if resolved in files:
                raw.set_trace_callback(statement)

    event.listen(Pool, "connect", watch)
    event.listen(Pool, "checkout", watch)
    try:
        yield spans
    finally:
        event.remove(Pool, "connect", watch)
        event.remove(Pool, "checkout", watch)


def test_a_prune_steps_aside_between_batches_as_long_as_each_held_the_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        for n in range(60):
            run = store.start_run(f"goal {n}", "plan.toml")
            store.checkpoint_steps(
                run, [StepRecord(s, "d", "x" * 2000, tokens=1) for s in range(1, 41)]
            )
            store.finish_run(run, "success")
    with write_transactions(path) as spans, Store.open(path) as store:
        pruned = store.prune_runs(before="2100-01-01T00:00:00Z", batch_rows=200)
    assert pruned.runs == 60
    assert len(spans) >= 10
    gaps = [
        (nxt_began - committed, committed - began)
        for (began, committed), (nxt_began, _) in pairwise(spans)
    ]
    short = [(round(gap * 1000, 2), round(held * 1000, 2)) for gap, held in gaps if gap < held]
    assert short == [], "(pause, batch held) in ms: a writer waits through the next batch too"
