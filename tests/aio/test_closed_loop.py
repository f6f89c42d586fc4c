"""An event loop closed under an `AsyncStore`: a `transaction()` block left open, or calls in
flight, when the loop that ran them is closed. What they held is released (the open block
rolls back: nothing of it is committed), the store goes on from a new loop and closes, and
nothing is printed on stderr.

Each scenario runs in a process of its own: a hang (a lock the dead loop's block still held)
must fail the test by a deadline rather than hang the suite, and what the garbage collector
prints when it finalizes the dead loop's coroutines must be seen on the process's stderr."""

from __future__ import annotations

import re
import subprocess

import pytest
from support.processes import child_python
from support.tiers import sampled

DEADLINE = 120.0
"""Seconds a scenario may take before it counts as hung: far beyond its second or two."""

AGAIN = """
async def again():
    await store.start_run("after", "f")
    async with store.transaction():
        await store.start_run("after-block", "f")
    await store.close()


asyncio.run(again())
"""
"""The scenarios' second loop: a call, a block and `close()` on the store the first left."""

SCENARIO = (
    r"""
import asyncio, gc, sys
from sqlalchemy import text
from harness_store import AsyncStore, Store

target, scenario = sys.argv[1], sys.argv[2]


async def holder(store, entered, nested):
    async with store.transaction():
        await store.start_run("inblock", "f")
        if nested:
            async with store.transaction():
                await store.start_run("nested", "f")
                entered.set()
                await asyncio.Event().wait()
        entered.set()
        await asyncio.Event().wait()


async def writer(store, i):
    await store.start_run(f"flight-{i}", "f")


async def ended_by_run():
    # asyncio.run ends when this returns: it cancels the tasks left and closes its loop
    store = await AsyncStore.open(target)
    entered = asyncio.Event()
    asyncio.ensure_future(holder(store, entered, scenario == "run-nested"))
    for i in range(8):
        asyncio.ensure_future(writer(store, i))
    await entered.wait()
    return store


def first_loop():
    if scenario.startswith("run-"):
        return asyncio.run(ended_by_run()), []
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(AsyncStore.open(target))
    entered = asyncio.Event()
    kept = []
    if scenario in ("block-collected", "block-kept", "nested-collected", "nested-kept"):
        nested = scenario.startswith("nested")
        task = loop.create_task(holder(store, entered, nested))
        loop.run_until_complete(entered.wait())
        task.cancel()  # never run again: the loop is closed first
        kept.append(task)
    elif scenario == "in-flight":
        kept.extend(loop.create_task(writer(store, i)) for i in range(8))

        async def block():
            async with store.transaction():
                await store.start_run("inblock", "f")
                await asyncio.Event().wait()

        kept.append(loop.create_task(block()))
        for _ in range(3):
            loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    if scenario.endswith("-kept"):
        return store, kept  # the dead loop's tasks stay referenced: never finalized
    return store, []


store, kept = first_loop()
gc.collect()  # the dead loop's coroutines (unless kept) are finalized here


"""
    + AGAIN
    + r"""with Store.open(target) as sync, sync.engine.connect() as conn:
    goals = sorted({goal for (goal,) in conn.execute(text("SELECT goal FROM runs"))})
print("goals", " ".join(goal for goal in goals if not goal.startswith("flight-")))
"""
)


def ran(script: str, target: str, scenario: str) -> tuple[str, str]:
    """The scenario's stdout and stderr, after checking it ended well within `DEADLINE`
    (a store that hangs after its loop closed fails the test, never the suite)."""
    child = child_python(script, target, scenario)
    try:
        out, err = child.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the store hung after its loop was closed\n{out}\n{err}")
    assert child.returncode == 0, err
    return out, err


OWN_TASK = re.compile(
    r"Task was destroyed but it is pending!\ntask: <Task [^\n]*"
    r"coro=<(first_loop\.<locals>\.)?(holder|block|writer|write)\(\)[^\n]*\n"
)
"""asyncio's own notice that the scenario's tasks were left pending on a closed loop: about
the caller's tasks, printed whatever store they used; anything else on stderr is not."""


@pytest.mark.parametrize(
    "scenario",
    sampled(
        [
            "block-collected",
            "block-kept",
            "nested-collected",
            "nested-kept",
            "in-flight",
            "run-block",
            "run-nested",
        ],
        keep=4,
    ),
)
def test_a_closed_loop_releases_what_its_calls_held(store_target: str, scenario: str) -> None:
    """A block left open by a closed loop (its coroutine finalized by the garbage collector,
    or kept referenced and never finalized), nested or not, or calls still in flight, or
    `asyncio.run` ending with a block and writes under way: the block rolls back, and a new
    loop's calls, blocks and `close()` go on."""
    out, err = ran(SCENARIO, store_target, scenario)
    assert out.splitlines()[-1] == "goals after after-block"  # nothing of the open block
    assert OWN_TASK.sub("", err) == ""


WAITING = (
    r"""
import asyncio, gc, sys
import psycopg
from sqlalchemy import text
from harness_store import AsyncStore, Store
from harness_store.engine import to_url

target, scenario = sys.argv[1], sys.argv[2]
admin = to_url(target).set(drivername="postgresql").render_as_string(False)


def first_loop():
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(AsyncStore.open(target))
    run = loop.run_until_complete(store.start_run("locked", "f"))
    hold = psycopg.connect(admin)
    hold.execute("SELECT id FROM runs WHERE id = %s FOR UPDATE", (run,))

    async def write():
        if scenario.startswith("block"):
            async with store.transaction():
                await store.start_run("inblock", "f")
                await store.set_status(run, "inblock")
        else:
            await store.set_status(run, "alone")

    async def waiting():
        with psycopg.connect(admin, autocommit=True) as look:
            while not look.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            ).fetchall():
                await asyncio.sleep(0.01)

    task = loop.create_task(write())
    loop.run_until_complete(waiting())  # the write waits on the row lock: in flight
    loop.close()
    hold.rollback()
    hold.close()
    return store, run, (task if scenario.endswith("-kept") else None)


store, run, kept = first_loop()
gc.collect()


"""
    + AGAIN
    + r"""with psycopg.connect(admin, autocommit=True) as look:
    for _ in range(3000):  # a closed socket's session ends soon after: poll, 30 s at most
        (sessions,) = look.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchone()
        if sessions == 0:
            break
        look.execute("SELECT pg_sleep(0.01)")
print("sessions", sessions)
with Store.open(target) as sync, sync.engine.connect() as conn:
    goals = sorted(goal for (goal,) in conn.execute(text("SELECT goal FROM runs")))
    print("goals", " ".join(goals), sync.status(run))
"""
)


@pytest.mark.parametrize("scenario", sampled(["block", "block-kept", "alone"], keep=2))
def test_postgresql_a_call_waiting_on_the_server_when_its_loop_closes(
    pg_url: str, scenario: str
) -> None:
    """A call waiting on a row lock when its loop is closed (in a block, or alone) leaves its
    greenlet parked on a driver coroutine the dead loop never resumes, its connection busy.
    The next loop closes that connection (the server rolls back what was open on it) and
    unwinds the call: nothing of the block is kept, a new loop's calls go on, and once the
    store is closed no session of it is left on the server."""
    out, err = ran(WAITING, pg_url, scenario)
    assert "sessions 0" in out.splitlines()
    # Nothing of the block; a lone write in flight committed whole or not at all.
    statuses = ("running", "alone") if scenario == "alone" else ("running",)
    assert out.splitlines()[-1] in {f"goals after after-block locked {s}" for s in statuses}
    assert OWN_TASK.sub("", err) == ""
