"""`AsyncStore.checkpoint_step` against the same statements sent raw through the asyncio
driver: psycopg's `AsyncConnection` in autocommit (one connection per task) on PostgreSQL,
`aiosqlite` (one connection, `BEGIN IMMEDIATE` … `COMMIT`, writers taking turns) on SQLite;
1 and 8 tasks, two alternating rounds of 2 s each. Besides the calls per second, the client's
CPU time per call (this process's, the server's not counted), the steadier figure on a busy
machine. `--slices` adds one task alternating with the raw driver every `SLICE` calls, 30 times
each: the median of the 30 ratios, which a load that changes by the second skews far less.

    python -m bench.asyncraw STORE [--slices]   # a SQLite file path or a PostgreSQL URL
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from harness_store import AsyncStore, StepRecord
from harness_store.store.runs import step_values

SECONDS = 2.0
SLICE = 200
"""Calls per slice of `--slices`."""
PAIRS = 30
"""Slices of each variant in `--slices`."""


async def drive(op: Any, tasks: int, seconds: float) -> tuple[float, float]:
    """Calls per second, and the process's CPU seconds per call."""
    count = 0
    cpu = time.process_time()
    stop = time.perf_counter() + seconds

    async def one(k: int) -> None:
        nonlocal count
        n = 0
        while time.perf_counter() < stop:
            n += 1
            await op(k, n)
            count += 1

    await asyncio.gather(*(one(k) for k in range(tasks)))
    return count / seconds, (time.process_time() - cpu) / max(count, 1)


async def sliced(a_op: Any, r_op: Any) -> tuple[float, float]:
    """One task, AsyncStore and raw alternating every `SLICE` calls (which goes first swapped
    each time): the medians over the pairs of raw time ÷ AsyncStore time, wall and CPU."""
    times: dict[str, list[tuple[float, float]]] = {"a": [], "r": []}
    n = 10**6
    for pair in range(PAIRS):
        order = [("a", a_op), ("r", r_op)]
        for name, op in order if pair % 2 == 0 else reversed(order):
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(SLICE):
                n += 1
                await op(0, n)
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    pairs = list(zip(times["a"], times["r"], strict=True))
    wall_ratio = statistics.median(r[0] / a[0] for a, r in pairs)
    cpu_ratio = statistics.median(r[1] / a[1] for a, r in pairs)
    return wall_ratio, cpu_ratio


async def main(target: str, slices: bool = False) -> None:
    store = await AsyncStore.open(target)
    sync = store.store
    runs = [await store.start_run("b", "f") for _ in range(16)]
    works = sync._checkpoints._checkpoint_writes

    async def a_op(k: int, n: int) -> None:
        await store.checkpoint_step(runs[k], StepRecord.new(n, "p" * 300, "r" * 50))

    conns: list[Any]
    if target.startswith("postgresql"):
        import psycopg

        dsn = target.replace("postgresql+psycopg", "postgresql")
        conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(8)]
        raw_runs = [await store.start_run("raw", "f") for _ in range(8)]

        async def r_op(k: int, n: int) -> None:
            values = step_values(raw_runs[k], StepRecord.new(n, "p" * 300, "r" * 50))
            conn = conns[k]
            if len(works) == 1:
                await conn.execute(works[0].sql, works[0].params(values))
            else:
                async with conn.transaction():
                    for w in works:
                        await conn.execute(w.sql, w.params(values))
    else:
        import aiosqlite

        one = await aiosqlite.connect(target, isolation_level=None)
        await one.execute("PRAGMA busy_timeout=5000")
        await one.execute("PRAGMA synchronous=FULL")
        conns = [one]
        raw_runs = [await store.start_run("raw", "f") for _ in range(8)]
        lock = asyncio.Lock()

        async def r_op(k: int, n: int) -> None:
            values = step_values(raw_runs[k], StepRecord.new(n, "p" * 300, "r" * 50))
            async with lock:
                c = conns[0]
                await c.execute("BEGIN IMMEDIATE")
                for w in works:
                    await c.execute(w.sql, w.params(values))
                await c.execute("COMMIT")

    out: dict[tuple[str, int], list[tuple[float, float]]] = {}
    variants: list[tuple[str, Any]] = [("AsyncStore", a_op), ("raw", r_op)]
    for _ in range(2):
        for tasks in (1, 8):
            for name, op in variants:
                out.setdefault((name, tasks), []).append(await drive(op, tasks, SECONDS))
        variants.reverse()
    for tasks in (1, 8):
        a, a_cpu = (sum(v) / 2 for v in zip(*out[("AsyncStore", tasks)], strict=True))
        r, r_cpu = (sum(v) / 2 for v in zip(*out[("raw", tasks)], strict=True))
        print(
            f"{sync.backend.name} {tasks} task(s): AsyncStore {a:,.0f}/s, "
            f"raw asyncio driver {r:,.0f}/s, ratio {a / r:.2f}x; client CPU per call "
            f"{a_cpu * 1e6:.0f} µs vs {r_cpu * 1e6:.0f} µs, ratio {r_cpu / a_cpu:.2f}x"
        )
    if slices:
        wall_ratio, cpu_ratio = await sliced(a_op, r_op)
        print(
            f"{sync.backend.name} 1 task, {PAIRS} alternating slices of {SLICE} calls: "
            f"median ratio {wall_ratio:.2f}x wall, {cpu_ratio:.2f}x client CPU"
        )
    for c in conns:
        await c.close()
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--slices" in sys.argv[2:]))
