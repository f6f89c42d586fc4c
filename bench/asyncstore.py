"""Benchmark 12: `AsyncStore.checkpoint_step` from asyncio tasks, beside the sync Store and
LangGraph's async savers.

Side by side, in alternating rounds of the same wall time, each variant on its own store:
- `AsyncStore.checkpoint_step` from 1 task, and from 8 concurrent tasks (each its own run);
- `Store.checkpoint_step` from 1 thread, and from 8 threads (the baseline);
- LangGraph's `AsyncSqliteSaver.aput` (SQLite, aiosqlite) / `AsyncPostgresSaver.aput`
  (PostgreSQL, a psycopg async pool) from 1 and 8 tasks (each its own thread id), saving a
  checkpoint that holds the same step.
SQLite under synchronous=FULL (upstream's durability); PostgreSQL with --pg. While the 8
AsyncStore tasks run, a ticker task sleeps 1 ms in a loop and records how late it wakes: the
event loop's lag (what every other coroutine of the program waits).
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from .common import Config, Table, checkpoint_ops, fmt_rate, fmt_ratio, fmt_time, say, step_record
from .group import drive
from .stores import copy_store, head_template, langgraph_checkpoint, pg_conninfo, pg_database

TASKS = 8
SINGLE_TARGET = 0.9
"""One task: at least this share of the sync Store's throughput from one thread."""
LAG_TARGET = 0.005
"""The event loop's worst lag while 8 tasks checkpoint under FULL (seconds)."""
BESIDE_THREADS_TARGET = 1.2
IDLE_TARGET = 2.0
"""The loop's worst delay with 8 AsyncStore tasks, at most this many times an idle loop's."""
RAW_TASKS_TARGET = 1.2
"""PostgreSQL: the loop's worst delay with 8 AsyncStore tasks, at most this many times with 8
raw psycopg async tasks (each call's Python runs on the loop there, as the driver's own)."""
"""The loop's worst delay with 8 AsyncStore tasks, at most this many times its worst delay
beside 8 threads of the sync Store in the same process (the same work on threads, handing
nothing back to the loop), round by round."""
TICK = 0.001

AsyncOp = Callable[[int, int], Awaitable[Any]]
"""An async checkpoint: (worker, n) → awaitable."""


class Ticker:
    """A task sleeping TICK in a loop beside the work, recording how late it wakes: the event
    loop's worst lag while it runs (`async with Ticker() as ticker: …; ticker.worst`)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._running = True
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while self._running:
            began = time.perf_counter()
            await asyncio.sleep(TICK)
            self.worst = max(self.worst, time.perf_counter() - began - TICK)

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._running = False
        assert self._task is not None
        await self._task


async def drive_tasks(op: AsyncOp, tasks: int, seconds: float) -> tuple[float, float]:
    """Run `tasks` tasks calling `op` in a loop for `seconds`, with a ticker measuring the
    loop's lag; return (calls per second over all tasks, worst lag in seconds)."""
    end = time.perf_counter() + seconds
    counts = [0] * tasks

    async def worker(k: int) -> None:
        clock = time.perf_counter
        n = 0
        while clock() < end:
            await op(k, n)
            n += 1
        counts[k] = n

    async with Ticker() as ticker:
        began = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(tasks)))
        elapsed = time.perf_counter() - began
    return sum(counts) / elapsed, ticker.worst


def saver_op(saver: Any, records: list[Any]) -> AsyncOp:
    prepared = [langgraph_checkpoint(r) for r in records]
    configs: dict[int, Any] = {}

    async def op(k: int, n: int) -> None:
        checkpoint, metadata = prepared[n % len(prepared)]
        checkpoint = {**checkpoint, "id": str(_uuid(k, n))}
        config = configs.get(k) or {"configurable": {"thread_id": f"t{k}", "checkpoint_ns": ""}}
        configs[k] = await saver.aput(config, checkpoint, metadata, {})

    return op


def _uuid(k: int, n: int) -> Any:
    from langgraph.checkpoint.base.id import uuid6

    return uuid6(clock_seq=(k << 20) + n)


def async_op(store: Any, runs: list[int], records: list[Any]) -> AsyncOp:
    checkpoint = store.checkpoint_step

    def op(k: int, n: int) -> Awaitable[Any]:
        return checkpoint(runs[k], records[n % len(records)])  # type: ignore[no-any-return]

    return op


async def measure(
    table: Table,
    label: str,
    sync_store: Any,
    async_store: Any,
    saver: Any,
    saver_name: str,
    runs: tuple[list[int], list[int]],
    cfg: Config,
    lag_target: bool,
) -> list[float]:
    """The variants' rows in `table`; returns each round's worst loop delay with 8 AsyncStore
    tasks."""
    records = [step_record(k) for k in range(1, 2001)]
    seconds = cfg.pick(2.0, 0.5)
    rounds = cfg.pick(5, 2)
    sync_runs, async_runs = runs
    sync_ops = checkpoint_ops(sync_store, sync_runs, lambda n: records[n % len(records)])
    a_op = async_op(async_store, async_runs, records)
    l_op = saver_op(saver, records)
    results: dict[str, list[float]] = {}
    lags: list[float] = []
    lag_store_1: list[float] = []
    lag_threads: list[float] = []
    lag_idle: list[float] = []
    lag_saver: list[float] = []
    variants: list[tuple[str, Callable[[], Awaitable[tuple[float, float]]]]] = [
        ("Store, 1 thread", lambda: _sync(sync_ops[:1], seconds)),
        ("AsyncStore, 1 task", lambda: drive_tasks(a_op, 1, seconds)),
        (f"{saver_name}, 1 task", lambda: drive_tasks(l_op, 1, seconds)),
        (f"Store, {TASKS} threads", lambda: _sync(sync_ops, seconds)),
        (f"AsyncStore, {TASKS} tasks", lambda: drive_tasks(a_op, TASKS, seconds)),
        (f"{saver_name}, {TASKS} tasks", lambda: drive_tasks(l_op, TASKS, seconds)),
        ("idle loop", lambda: idle_lag(seconds)),
    ]
    await drive_tasks(a_op, TASKS, 0.2)  # warm up
    await drive_tasks(l_op, TASKS, 0.2)
    for r in range(rounds):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for name, go in order:
            rate, lag = await go()
            what = f"{fmt_rate(rate)}, worst lag {fmt_time(lag)}"
            say(f"{label} round {r + 1}/{rounds}: {name}: {what}")
            results.setdefault(name, []).append(rate)
            if name == f"AsyncStore, {TASKS} tasks":
                lags.append(lag)
            elif name == f"Store, {TASKS} threads":
                lag_threads.append(lag)
            elif name == "idle loop":
                lag_idle.append(lag)
            elif name == f"{saver_name}, {TASKS} tasks":
                lag_saver.append(lag)
            if name == "AsyncStore, 1 task":
                lag_store_1.append(lag)

    def ratio(candidate: str, baseline: str) -> float:
        pairs = zip(results[candidate], results[baseline], strict=True)
        return statistics.median(c / b for c, b in pairs)

    for name, _ in variants[:-1]:
        rate = statistics.median(results[name])
        table.add(label, name, fmt_time(1 / rate), fmt_rate(rate), "", "", "")
    one = ratio("AsyncStore, 1 task", "Store, 1 thread")
    table.add(
        label,
        "AsyncStore 1 task vs Store 1 thread",
        "",
        "",
        fmt_ratio(one),
        f"≥ {SINGLE_TARGET:.2f}×",
        table.check(f"{label}: AsyncStore 1 task ≥ {SINGLE_TARGET}× Store", one >= SINGLE_TARGET),
    )
    many = ratio(f"AsyncStore, {TASKS} tasks", f"Store, {TASKS} threads")
    table.add(
        label, f"AsyncStore {TASKS} tasks vs Store {TASKS} threads", "", "", fmt_ratio(many), "", ""
    )
    for tasks in (1, TASKS):
        suffix = "1 task" if tasks == 1 else f"{TASKS} tasks"
        faster = ratio(f"AsyncStore, {suffix}", f"{saver_name}, {suffix}")
        table.add(
            label,
            f"AsyncStore vs {saver_name}, {suffix}",
            "",
            "",
            f"{fmt_ratio(faster)} faster",
            "> 1.00×",
            table.check(f"{label}: AsyncStore faster than {saver_name} ({suffix})", faster > 1),
        )
    worst = max(lags)
    table.add(
        label,
        f"event-loop lag, {TASKS} AsyncStore tasks (worst)",
        fmt_time(worst),
        "",
        f"median of rounds {fmt_time(statistics.median(lags))}",
        f"< {LAG_TARGET * 1e3:.0f} ms" if lag_target else "",
        table.check(f"{label}: event-loop lag < 5 ms with {TASKS} tasks", worst < LAG_TARGET)
        if lag_target
        else "",
    )
    beside = statistics.median(a / t for a, t in zip(lags, lag_threads, strict=True))
    table.add(
        label,
        f"event-loop lag, {TASKS} AsyncStore tasks ÷ beside {TASKS} sync Store threads",
        "",
        "",
        f"{fmt_ratio(beside)} (median of the rounds' worst-delay ratios)",
        f"≤ {BESIDE_THREADS_TARGET:.1f}×",
        table.check(
            f"{label}: event-loop lag ≤ {BESIDE_THREADS_TARGET}× beside sync Store threads",
            beside <= BESIDE_THREADS_TARGET,
        ),
    )
    beside_saver = statistics.median(a / t for a, t in zip(lags, lag_saver, strict=True))
    table.add(
        label,
        f"event-loop lag, {TASKS} AsyncStore tasks ÷ {TASKS} {saver_name} tasks",
        "",
        "",
        f"{fmt_ratio(beside_saver)} (median of the rounds' worst-delay ratios)",
        "",
        "",
    )
    over_idle = statistics.median(a / t for a, t in zip(lags, lag_idle, strict=True))
    table.add(
        label,
        f"event-loop lag, {TASKS} AsyncStore tasks ÷ idle loop",
        "",
        "",
        f"{fmt_ratio(over_idle)} (median of the rounds' worst-delay ratios)",
        f"≤ {IDLE_TARGET:.1f}×",
        table.check(f"{label}: event-loop lag ≤ {IDLE_TARGET}× an idle loop's",
                    over_idle <= IDLE_TARGET),
    )  # fmt: skip
    for what, series in (
        (f"event-loop lag, {TASKS} {saver_name} tasks (worst)", lag_saver),
        (f"event-loop lag beside {TASKS} sync Store threads (worst)", lag_threads),
        ("event-loop lag, idle loop (worst; the machine's own)", lag_idle),
    ):
        table.add(
            label,
            what,
            fmt_time(max(series)),
            "",
            f"median of rounds {fmt_time(statistics.median(series))}",
            "",
            "",
        )
    return lags


async def _sync(ops: list[Callable[[int], None]], seconds: float) -> tuple[float, float]:
    """The sync Store's threads, with the loop's ticker running beside them (the lag that
    threads checkpointing in the same process cause, whoever calls them)."""
    async with Ticker() as ticker:
        rate, _ = await asyncio.to_thread(drive, ops, seconds)
    return rate, ticker.worst


async def idle_lag(seconds: float) -> tuple[float, float]:
    """The ticker alone: the machine's own lag (other processes on the shared CPUs)."""
    return await drive_tasks(_nothing, 1, seconds)


async def _nothing(k: int, n: int) -> None:
    await asyncio.sleep(0.01)


def _new_runs(store: Any, count: int) -> list[int]:
    return [store.start_run(f"bench {k}", "src/parser.rs") for k in range(count)]


async def sqlite_part(cfg: Config, table: Table) -> None:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from harness_store import AsyncStore, Store

    template = head_template(cfg)
    sync_path = copy_store(template, cfg.work / "as-sync.sqlite3")
    async_path = copy_store(template, cfg.work / "as-async.sqlite3")
    async with AsyncExitStack() as stack:
        sync_store = stack.enter_context(Store.open(sync_path, synchronous="full"))
        async_store = await stack.enter_async_context(
            await AsyncStore.open(async_path, synchronous="full")
        )
        conn = await aiosqlite.connect(str(cfg.work / "as-langgraph.sqlite3"))
        stack.push_async_callback(conn.close)
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        await conn.execute("PRAGMA synchronous = FULL")
        runs = (_new_runs(sync_store, TASKS), [await async_store.start_run("b", "f")])
        runs[1].extend([await async_store.start_run("b", "f") for _ in range(TASKS - 1)])
        await measure(
            table, "SQLite FULL", sync_store, async_store, saver, "AsyncSqliteSaver.aput",
            runs, cfg, lag_target=True,
        )  # fmt: skip


async def postgresql_part(cfg: Config, table: Table, server: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from harness_store import AsyncStore, Store

    with (
        pg_database(server, f"hs_bench_as_{threading.get_native_id()}") as url,
        pg_database(server, f"hs_bench_lg_{threading.get_native_id()}") as lg_url,
    ):
        async with AsyncExitStack() as stack:
            sync_store = stack.enter_context(Store.open(url))
            async_store = await stack.enter_async_context(await AsyncStore.open(url))
            pool = AsyncConnectionPool(
                pg_conninfo(lg_url),
                min_size=TASKS,
                max_size=TASKS,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                open=False,
            )
            await pool.open()
            stack.push_async_callback(pool.close)
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await saver.setup()
            runs = (_new_runs(sync_store, TASKS), [])
            runs[1].extend([await async_store.start_run("b", "f") for _ in range(TASKS)])
            lags = await measure(
                table, "PostgreSQL", sync_store, async_store, saver, "AsyncPostgresSaver.aput",
                runs, cfg, lag_target=False,
            )  # fmt: skip
            await driver_floor(table, lg_url, cfg, lags)


DRIVER_SQL = (
    "INSERT INTO hs_bench_driver (run_id, step, decision, result, prompt, tool_call, tokens) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


async def driver_floor(table: Table, url: Any, cfg: Config, lags: list[float]) -> None:
    """psycopg alone, one autocommitted INSERT of a step per call, sync against async: what
    native asyncio costs before any Store code (the floor under AsyncStore ÷ Store); and the
    loop's delay with 8 such tasks, the floor under `lags` (8 AsyncStore tasks' rounds)."""
    import psycopg

    records = [step_record(k) for k in range(1, 2001)]
    params = [(1, r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens) for r in records]
    seconds, rounds = cfg.pick(2.0, 0.5), cfg.pick(5, 2)
    info = pg_conninfo(url)
    with psycopg.connect(info, autocommit=True) as setup:
        setup.execute(
            "CREATE TABLE hs_bench_driver (run_id BIGINT, step BIGINT, decision TEXT, "
            "result TEXT, prompt TEXT, tool_call TEXT, tokens BIGINT)"
        )
    sync_conn = psycopg.connect(info, autocommit=True)
    async_conn = await psycopg.AsyncConnection.connect(info, autocommit=True)
    many: list[Any] = []
    try:
        sync_cursor, async_cursor = sync_conn.cursor(), async_conn.cursor()

        def sync_op(n: int) -> None:
            sync_cursor.execute(DRIVER_SQL, params[n % len(params)])

        async def async_op(k: int, n: int) -> None:
            await async_cursor.execute(DRIVER_SQL, params[n % len(params)])

        for _ in range(TASKS):
            many.append(await psycopg.AsyncConnection.connect(info, autocommit=True))
        many_cursors = [conn.cursor() for conn in many]

        async def async_many(k: int, n: int) -> None:
            await many_cursors[k].execute(DRIVER_SQL, params[n % len(params)])

        sync_rates, async_rates, many_lags = [], [], []
        for _ in range(rounds):
            sync_rates.append((await _sync([sync_op], seconds))[0])
            async_rates.append((await drive_tasks(async_op, 1, seconds))[0])
            many_lags.append((await drive_tasks(async_many, TASKS, seconds))[1])
    finally:
        sync_conn.close()
        await async_conn.close()
        for conn in many:
            await conn.close()
    table.add(
        "PostgreSQL",
        f"event-loop lag, {TASKS} psycopg async tasks, a connection each (worst)",
        fmt_time(max(many_lags)),
        "",
        f"median of rounds {fmt_time(statistics.median(many_lags))}",
        "",
        "",
    )
    over_raw = statistics.median(lags) / statistics.median(many_lags)
    table.add(
        "PostgreSQL",
        f"event-loop lag, {TASKS} AsyncStore tasks ÷ {TASKS} psycopg async tasks",
        "",
        "",
        f"{fmt_ratio(over_raw)} (medians of the rounds' worst delays)",
        f"≤ {RAW_TASKS_TARGET:.1f}×",
        table.check(
            f"PostgreSQL: event-loop lag ≤ {RAW_TASKS_TARGET}× {TASKS} raw psycopg async tasks",
            over_raw <= RAW_TASKS_TARGET,
        ),
    )
    for name, rates in (
        ("psycopg sync, 1 thread", sync_rates),
        ("psycopg async, 1 task", async_rates),
    ):
        rate = statistics.median(rates)
        table.add("PostgreSQL", name, fmt_time(1 / rate), fmt_rate(rate), "", "", "")
    ratio = statistics.median(a / b for a, b in zip(async_rates, sync_rates, strict=True))
    table.add("PostgreSQL", "psycopg async ÷ sync (the driver's own floor)", "", "",
              fmt_ratio(ratio), "", "")  # fmt: skip


def run(cfg: Config) -> list[Table]:
    table = Table(
        "12. AsyncStore.checkpoint_step from asyncio tasks (per call; rates over all tasks)",
        ["backend", "variant", "time/call", "calls/s", "ratio", "target", "result"],
    )
    say("AsyncStore: SQLite, synchronous=FULL")
    asyncio.run(sqlite_part(cfg, table))
    if cfg.pg:
        say("AsyncStore: PostgreSQL")
        asyncio.run(postgresql_part(cfg, table, cfg.pg))
    else:
        table.notes.append("PostgreSQL rows need --pg URL")
    table.notes.append(
        "each variant runs for the same wall time per round, rounds alternate the order; "
        "time/call = 1 / (calls/s over all workers); ratios are medians over rounds of the "
        "paired rates; 8 workers write 8 runs (LangGraph: 8 thread ids) of one store"
    )
    table.notes.append(
        "event-loop lag: the worst delay past its 1 ms sleep of a ticker task running beside "
        "the 8 AsyncStore tasks (SQLite calls run on threads; PostgreSQL's on the loop)"
    )
    return [table]
