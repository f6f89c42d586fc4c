"""The threads one SQLite `AsyncStore` runs on: at most four, named for their lane, all ended
when the store closes; and its writer lane still commits concurrent tasks' writes together.

A real store file, real threads: `threading.enumerate()` before the store opens, while it
works through every kind of call (reads, writes, an async iteration, a `transaction()` block,
eight tasks writing at once), and after it closes. A commit is counted where SQLite runs it,
by the store connection's own trace of the statements it executes.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from harness_store import AsyncStore, StepRecord, Store
from harness_store.connector.sqlite import SQLiteConnector

MAX_THREADS = 4
"""Two writer threads, a reader and the thread pinned to an open block."""
TASKS = 8
WRITES_EACH = 12
SAFETY = 120
"""Seconds after which a hung await fails the test instead of hanging it (not a timing)."""


def steps(count: int, tag: str) -> list[StepRecord]:
    return [StepRecord.new(n, f"{tag}{n}", f"r{n}") for n in range(1, count + 1)]


def test_one_sqlite_asyncstore_starts_at_most_four_named_threads_and_ends_them(
    tmp_path: Path,
) -> None:
    target = str(tmp_path / "runs.sqlite3")
    Store.open(target).close()  # created and upgraded outside the count
    seen: set[threading.Thread] = set()

    def look() -> None:
        seen.update(threading.enumerate())

    async def body() -> None:
        async with await AsyncStore.open(target) as store:
            look()
            run_id = await store.start_run("threads", "f")
            await store.checkpoint_steps(run_id, steps(30, "a"))
            assert await store.run_status(run_id) is not None
            look()
            pulled = [step async for step in store.iter_steps(run_id, page=7)]
            assert len(pulled) == 30
            look()
            async with store.transaction():
                await store.set_status(run_id, "in-block")
                look()
                assert await store.last_step(run_id) is not None

            async def writer(k: int) -> None:
                own = await store.start_run(f"writer-{k}", "f")
                for n in range(1, WRITES_EACH + 1):
                    await store.checkpoint_step(own, StepRecord.new(n, f"w{n}", f"r{n}"))
                look()

            await asyncio.gather(*(writer(k) for k in range(TASKS)))
            look()
            assert len(await store.runs()) == TASKS + 1

    before = set(threading.enumerate())
    asyncio.run(asyncio.wait_for(body(), SAFETY))
    started = seen - before
    names = sorted(thread.name for thread in started)
    assert len(started) <= MAX_THREADS, names
    assert all(name.startswith("harness_store-") for name in names), names
    assert not [thread.name for thread in started if thread.is_alive()]


def test_eight_tasks_writing_at_once_share_commits(tmp_path: Path) -> None:
    target = str(tmp_path / "runs.sqlite3")
    Store.open(target).close()
    statements: list[str] = []

    async def body() -> None:
        async with await AsyncStore.open(target) as store:
            run_ids = [await store.start_run(f"writer-{k}", "f") for k in range(TASKS)]
            connector = store.store._connector
            assert isinstance(connector, SQLiteConnector)
            raw = connector.raw  # the store's own connection: count its COMMITs there
            raw.set_trace_callback(statements.append)
            try:

                async def writer(run_id: int) -> None:
                    for n in range(1, WRITES_EACH + 1):
                        await store.checkpoint_step(run_id, StepRecord.new(n, f"w{n}", f"r{n}"))

                await asyncio.gather(*(writer(run_id) for run_id in run_ids))
            finally:
                raw.set_trace_callback(None)

    asyncio.run(asyncio.wait_for(body(), SAFETY))
    commits = sum(1 for statement in statements if statement.strip().upper() == "COMMIT")
    writes = TASKS * WRITES_EACH
    with Store.open(target) as sync:
        assert sum(len(sync.steps(run_id)) for run_id in sync.runs()) == writes
    assert 0 < commits <= writes // 2, f"{commits} commits for {writes} writes"
