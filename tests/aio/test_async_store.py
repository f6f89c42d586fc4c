"""AsyncStore: its method set against Store's, and what only an asyncio facade can get wrong.

The Store suite itself runs against AsyncStore too (conftest's `store_api`); here: every Store
method has its async twin of the same signature; a read completes while a write transaction
is held; each task's `transaction()` is its own; errors are the Store's typed errors; an
abandoned async iteration leaves nothing held; a call or block cancelled at a random point is
all or nothing and the store stays usable; the sync Store reads what AsyncStore wrote; on
PostgreSQL calls run on the event loop, with no thread per call. Both backends, real
databases; the tests drive their own event loop (`asyncio.run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import random
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from harness_store import AsyncStore, StepRecord, Store
from harness_store.aio import AsyncLease
from harness_store.aio.methods import NOT_MIRRORED, PROPERTIES, access, public_methods, unmarked
from harness_store.errors import (
    InvalidValueError,
    RunNotFoundError,
    StoreAccessError,
    StoreError,
)

ROUNDS = 80
"""Cancellations per backend and kind (plain call, transaction block)."""
STEPS = 6
"""Steps one cancelled call or block writes: all of them, or none."""
SAFETY = 120
"""Seconds after which a hung await fails the test instead of hanging it (not a timing)."""


def run(body: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(body(), SAFETY))


def steps(count: int, tag: str = "d") -> list[StepRecord]:
    return [StepRecord.new(n, f"{tag}{n}", f"r{n}") for n in range(1, count + 1)]


# --- the method set ----------------------------------------------------------------------------


def test_every_store_method_has_an_async_twin_of_the_same_signature() -> None:
    assert unmarked(Store) == set(), "mark new Store methods (harness_store/store/marks.py)"
    for name in sorted(public_methods(Store)):
        twin = inspect.getattr_static(AsyncStore, name, None)
        assert twin is not None, f"AsyncStore lacks {name}"
        original = getattr(Store, name)
        mirrored = getattr(AsyncStore, name)
        if name == "transaction":
            continue  # an async context manager, checked below
        if access(Store, name).iterates:
            assert inspect.isasyncgenfunction(mirrored), name
        else:
            assert inspect.iscoroutinefunction(mirrored), name
        want = list(inspect.signature(original).parameters.values())
        got = list(inspect.signature(mirrored).parameters.values())
        if name in {"open", "memory"}:  # classmethods: bound on both sides
            assert isinstance(twin, classmethod), name
        assert [(p.name, p.kind, p.default) for p in got] == [
            (p.name, p.kind, p.default) for p in want
        ], name
    for name in PROPERTIES:
        assert isinstance(inspect.getattr_static(AsyncStore, name), property), name
    assert public_methods(Store) >= NOT_MIRRORED


def test_a_method_added_to_store_later_is_placed_as_a_write() -> None:
    class Grown(Store):
        def brand_new(self, run_id: int) -> int:
            return run_id

    assert unmarked(Grown) == {"brand_new"}
    assert access(Grown, "brand_new").kind == "write"


def test_transaction_is_an_async_context_manager(store_target: str) -> None:
    async def body() -> None:
        async with await AsyncStore.open(store_target) as store:
            block = store.transaction()
            assert hasattr(block, "__aenter__") and hasattr(block, "__aexit__")
            async with block:
                run_id = await store.start_run("t", "f")
            assert await store.status(run_id) == "running"

    run(body)


# --- concurrency -------------------------------------------------------------------------------


def test_a_read_completes_while_a_write_transaction_is_held(store_target: str) -> None:
    async def body() -> None:
        async with await AsyncStore.open(store_target) as store:
            before = await store.start_run("committed", "f")
            inside = asyncio.Event()
            release = asyncio.Event()

            async def writer() -> int:
                async with store.transaction():
                    run_id = await store.start_run("uncommitted", "f")
                    inside.set()
                    await release.wait()
                return run_id

            writing = asyncio.create_task(writer())
            await inside.wait()
            # the write transaction is open (SQLite: its write lock is held) and the read ends
            assert await store.runs() == [before]
            assert await store.status(before) == "running"
            assert not writing.done()
            release.set()
            after = await writing
            assert sorted(await store.runs()) == [before, after]

    run(body)


def test_each_tasks_transaction_is_its_own(store_target: str) -> None:
    async def body() -> None:
        async with await AsyncStore.open(store_target) as store:
            inside = asyncio.Event()
            release = asyncio.Event()

            async def rolled_back() -> None:
                with pytest.raises(RuntimeError):
                    async with store.transaction():
                        await store.start_run("undone", "f")
                        inside.set()
                        await release.wait()
                        raise RuntimeError("undo the block")

            block = asyncio.create_task(rolled_back())
            await inside.wait()
            # another task's write is not part of the block (on SQLite it waits for the block)
            outside = asyncio.create_task(store.start_run("kept", "f"))
            await asyncio.sleep(0)
            release.set()
            await block
            kept = await outside
            assert await store.runs() == [kept]
            assert await store.status(kept) == "running"

            async def nested() -> None:
                async with store.transaction():
                    first = await store.start_run("outer", "f")
                    with pytest.raises(RuntimeError):
                        async with store.transaction():
                            await store.start_run("inner", "f")
                            raise RuntimeError("undo the savepoint")
                    await store.set_status(first, "done")

            await nested()
            runs = await store.runs()
            assert len(runs) == 2 and await store.status(max(runs)) == "done"

    run(body)


def test_errors_are_the_stores_typed_errors(store_target: str) -> None:
    async def body() -> None:
        async with await AsyncStore.open(store_target) as store:
            with pytest.raises(RunNotFoundError):
                await store.checkpoint_step(424242, StepRecord.new(1, "d", "r"))
            with pytest.raises(InvalidValueError):
                await store.events_after(0, -1)
            with pytest.raises(InvalidValueError):
                async for _ in store.iter_steps(1, page=0):
                    pass
            with pytest.raises(InvalidValueError):
                async for _ in store.follow(interval=0):
                    pass
            async with store.transaction():  # a failing call inside a block fails alone
                kept = await store.start_run("kept", "f")
                with pytest.raises(RunNotFoundError):
                    await store.checkpoint_step(424242, StepRecord.new(1, "d", "r"))
            assert await store.runs() == [kept]
            await store.close()
            with pytest.raises(StoreError, match="closed"):
                await store.runs()
        async with await AsyncStore.open(store_target, read_only=True) as reader:
            assert await reader.runs() == [kept]
            with pytest.raises(StoreAccessError):
                await reader.start_run("refused", "f")

    run(body)


@pytest.mark.slow_on("postgresql")
def test_an_abandoned_async_iteration_holds_nothing(store_target: str) -> None:
    async def body() -> None:
        async with await AsyncStore.open(store_target) as store:
            run_id = await store.start_run("long", "f")
            await store.checkpoint_steps(run_id, steps(50))
            seen = []
            iterator = store.iter_steps(run_id, page=7)
            async for step in iterator:
                seen.append(step.step)
                if len(seen) == 10:
                    break  # neither exhausted nor closed
            del iterator
            gc.collect()
            await asyncio.sleep(0)
            async with store.transaction():
                await store.checkpoint_step(run_id, StepRecord.new(51, "d", "r"))
            assert seen == list(range(1, 11))
            assert [s.step async for s in store.iter_steps(run_id, page=7)] == list(range(1, 52))
        with Store.open(store_target) as sync:  # and nothing of it holds the store's lock
            sync.checkpoint_step(run_id, StepRecord.new(52, "d", "r"))
            assert sync.last_step(run_id) == 52

    run(body)


# --- cancellation ------------------------------------------------------------------------------


async def _cancel_at_random(store: AsyncStore, work: Awaitable[Any], rng: random.Random) -> None:
    """Start `work`, let the loop turn a random number of times, cancel it."""
    task = asyncio.ensure_future(work)
    for _ in range(rng.randrange(0, 40)):
        if task.done():
            break
        await asyncio.sleep(0)
    if rng.random() < 0.3:
        await asyncio.sleep(rng.uniform(0, 0.003))
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.mark.slow_on("postgresql")
def test_a_call_cancelled_at_a_random_point_is_all_or_nothing(store_target: str) -> None:
    rng = random.Random(18)

    async def body() -> list[int]:
        async with await AsyncStore.open(store_target) as store:
            targets = [await store.start_run(f"plain-{i}", "f") for i in range(ROUNDS)]
            for run_id in targets:
                await _cancel_at_random(store, store.checkpoint_steps(run_id, steps(STEPS)), rng)
                # usable at once: a call right after the cancelled one succeeds
                assert await store.status(run_id) == "running"
                await store.set_status(run_id, "checked")
            return targets

    targets = run(body)
    with Store.open(store_target) as sync:
        counts = [len(sync.steps(run_id)) for run_id in targets]
        assert set(counts) <= {0, STEPS}, counts
        assert all(sync.status(run_id) == "checked" for run_id in targets)
        assert sync.checkpoint_events(targets[0]) is not None


def test_an_iteration_cancelled_at_a_random_point_raises_only_the_cancellation(
    store_target: str,
) -> None:
    """A task cancelled while its `async for` pulls a page (on a thread, on SQLite) gets its
    CancelledError, nothing else, and the store goes on: the page being read is finished and
    the generator closed after it, never under it."""
    rng = random.Random(1819)

    async def body() -> dict[str, int]:
        async with await AsyncStore.open(store_target) as store:
            run_id = await store.start_run("long", "f")
            await store.checkpoint_steps(run_id, steps(300))
            others: dict[str, int] = {}

            async def consume() -> None:
                async for _ in store.iter_steps(run_id, page=5):
                    pass

            for _ in range(ROUNDS * 2):
                task = asyncio.ensure_future(consume())
                for _ in range(rng.randrange(0, 30)):
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except BaseException as exc:  # counted, then asserted to be none
                    others[repr(exc)] = others.get(repr(exc), 0) + 1
            assert [s.step async for s in store.iter_steps(run_id, page=50)] == list(range(1, 301))
            return others

    assert run(body) == {}


@pytest.mark.slow_on("postgresql")
def test_a_block_cancelled_at_a_random_point_is_all_or_nothing(store_target: str) -> None:
    rng = random.Random(1818)

    async def block(store: AsyncStore, i: int) -> None:
        async with store.transaction():
            run_id = await store.start_run(f"block-{i}", "f")
            await store.checkpoint_steps(run_id, steps(STEPS // 2, "a"))
            for n in range(STEPS // 2 + 1, STEPS + 1):
                await store.checkpoint_step(run_id, StepRecord.new(n, f"b{n}", "r"))
            await store.set_status(run_id, "whole")

    async def body() -> int:
        async with await AsyncStore.open(store_target) as store:
            for i in range(ROUNDS):
                await _cancel_at_random(store, block(store, i), rng)
                # usable at once, inside a block and out of one
                async with store.transaction():
                    probe = await store.start_run(f"probe-{i}", "f")
                await store.finish_run(probe, "ok")
            return len(await store.runs())

    total = run(body)
    with Store.open(store_target) as sync:
        runs = sync.runs()
        assert len(runs) == total
        blocks = [r for r in runs if sync.outcome(r) is None]
        for run_id in blocks:  # every block that committed committed whole
            assert sync.status(run_id) == "whole"
            assert [s.step for s in sync.steps(run_id)] == list(range(1, STEPS + 1))
        probes = [r for r in runs if sync.outcome(r) == "ok"]
        assert len(probes) == ROUNDS
        assert len(blocks) + len(probes) == len(runs)


@pytest.mark.slow_on("postgresql")
def test_a_program_that_never_closes_its_store_still_exits_with_its_writes(
    store_target: str,
) -> None:
    """An AsyncStore left open (a script that forgets `close`) must not hold the interpreter
    at exit, and what its calls returned from is kept."""
    program = f"""
import asyncio
from harness_store import AsyncStore, StepRecord
kept = []  # referenced until the interpreter exits
async def main():
    store = await AsyncStore.open({store_target!r})
    kept.append(store)
    run_id = await store.start_run("left open", "f")
    await asyncio.gather(*(store.checkpoint_step(run_id, StepRecord.new(n, "d", "r"))
                           for n in range(1, 9)))
    print(run_id, flush=True)
asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=SAFETY
    )
    assert done.returncode == 0, done.stderr
    with Store.open(store_target) as sync:
        assert [s.step for s in sync.steps(int(done.stdout))] == list(range(1, 9))


# --- the sync Store, threads -------------------------------------------------------------------


def test_the_sync_store_reads_what_asyncstore_wrote(store_target: str) -> None:
    async def body() -> tuple[int, list[str]]:
        async with await AsyncStore.open(store_target) as store:
            run_id = await store.start_run("shared", "f")
            await asyncio.gather(
                *(store.checkpoint_step(run_id, s) for s in steps(12)),
                store.memory_put("/ws", "k", "v", run_id, 1),
            )
            lease = await store.acquire_lease(run_id, 60)
            assert isinstance(lease, AsyncLease)
            async with lease:
                await lease.renew()
            return run_id, [s.decision async for s in store.iter_steps(run_id)]

    run_id, decisions = run(body)
    with Store.open(store_target) as sync:
        assert sorted(s.decision for s in sync.steps(run_id)) == sorted(decisions)
        assert len(decisions) == 12
        entry = sync.memory_get("/ws", "k")
        assert entry is not None and entry.value == "v"
        assert sync.run_lease(run_id) is None


def test_postgresql_calls_run_on_the_event_loop(pg_url: str) -> None:
    async def body() -> None:
        async with await AsyncStore.open(pg_url) as store:
            run_id = await store.start_run("loop", "f")
            before = threading.active_count()
            await asyncio.gather(
                *(store.checkpoint_step(run_id, s) for s in steps(40)),
                *(store.last_step(run_id) for _ in range(20)),
            )
            assert threading.active_count() == before  # no thread per call
            assert await store.last_step(run_id) == 40

    run(body)


def test_postgresql_a_connection_the_server_ended_is_replaced(pg_url: str) -> None:
    """The asyncio pool has no pre-ping: a connection whose session the server ended is found
    when handed out (its socket is readable) and replaced, so the next call succeeds."""
    import psycopg

    from harness_store.engine import to_url

    admin_url = to_url(pg_url).set(drivername="postgresql").render_as_string(False)

    async def body() -> None:
        async with await AsyncStore.open(pg_url) as store:
            run_id = await store.start_run("survivor", "f")
            await asyncio.gather(*(store.last_step(run_id) for _ in range(8)))  # warm the pool
            with psycopg.connect(admin_url, autocommit=True) as admin:
                ended = admin.execute(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchall()
            assert ended and all(row[0] for row in ended)
            for n in range(1, 4):
                await store.checkpoint_step(run_id, StepRecord.new(n, "d", "r"))
            assert await store.last_step(run_id) == 3

    run(body)
