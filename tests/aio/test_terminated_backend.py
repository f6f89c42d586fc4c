"""A Store or AsyncStore on PostgreSQL whose server sessions are ended under load
(`pg_terminate_backend`, as a server restart or an idle reaper does): the calls caught by it
fail with a typed `StoreConnectionError`, the store recovers on fresh connections, and nothing
(no driver or pool warning, no traceback, no ResourceWarning for a connection left open) is
printed on stderr, neither then nor when the store is closed or the process exits.

In a process of its own, with every warning shown (`-W default`), since what the driver or
the garbage collector prints goes to that process's stderr."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.processes import REPO

DEADLINE = 120.0
"""Seconds the scenario may take: far beyond its few seconds."""

LOAD = r"""
import asyncio, sys, threading
import psycopg
from harness_store import AsyncStore, Store, StepRecord
from harness_store.engine import to_url
from harness_store.errors import StoreConnectionError

target, api = sys.argv[1], sys.argv[2]
admin = to_url(target).set(drivername="postgresql").render_as_string(False)
WORKERS, ROUNDS = 6, 5
others = []


def terminate():
    with psycopg.connect(admin, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()[0]


def step(worker, n):
    return StepRecord.new(worker * 1_000_000 + n, "d", "r")


def sync_body():
    store = Store.open(target)
    run = store.start_run("load", "f")
    progress = [threading.Semaphore(0) for _ in range(WORKERS)]
    stop = threading.Event()

    def work(worker):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                store.checkpoint_step(run, step(worker, n))
                store.last_step(run)
                if n % 4 == 0:
                    with store.transaction():
                        store.set_status(run, "busy")
                        store.checkpoint_steps(run, [step(worker, 500_000 + n)])
            except StoreConnectionError:
                pass
            except Exception as exc:
                others.append(repr(exc))
            progress[worker].release()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(WORKERS)]
    for thread in threads:
        thread.start()
    for _ in range(ROUNDS):
        for each in progress:  # every worker made a call since the last termination
            each.acquire()
        terminate()
    stop.set()
    for thread in threads:
        thread.join()
    store.checkpoint_step(run, step(9, 1))  # recovered
    assert store.last_step(run) >= 9_000_001
    store.close()


async def async_body():
    store = await AsyncStore.open(target)
    run = await store.start_run("load", "f")
    progress = [asyncio.Semaphore(0) for _ in range(WORKERS)]
    stop = asyncio.Event()

    async def work(worker):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                await store.checkpoint_step(run, step(worker, n))
                await store.last_step(run)
                if n % 4 == 0:
                    async with store.transaction():
                        await store.set_status(run, "busy")
                        await store.checkpoint_steps(run, [step(worker, 500_000 + n)])
            except StoreConnectionError:
                pass
            except Exception as exc:
                others.append(repr(exc))
            progress[worker].release()

    tasks = [asyncio.ensure_future(work(k)) for k in range(WORKERS)]
    for _ in range(ROUNDS):
        for each in progress:
            await each.acquire()
        await asyncio.to_thread(terminate)
    stop.set()
    await asyncio.gather(*tasks)
    await store.checkpoint_step(run, step(9, 1))
    assert await store.last_step(run) >= 9_000_001
    await store.close()


if api == "Store":
    sync_body()
else:
    asyncio.run(async_body())
print("others", others)
"""


@pytest.mark.parametrize("api", ["Store", "AsyncStore"])
def test_postgresql_terminated_sessions_print_nothing(pg_url: str, api: str) -> None:
    """Sessions ended five times under six busy threads (Store) or tasks (AsyncStore): only
    typed connection errors, the store writes again afterwards, and stderr stays empty."""
    child = subprocess.run(
        [sys.executable, "-W", "default", "-c", LOAD, pg_url, api],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd=REPO,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines()[-1] == "others []"
    assert child.stderr == ""
