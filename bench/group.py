"""Benchmark 11: many threads of one process checkpointing into one store (group commit).

An agent tree runs a parent and its children in one process, each checkpointing its own run.
Side by side, for 1, 2, 4, 8 and 16 threads, each writing its own run for the same wall time:
- one `Store` shared by all threads (`checkpoint_step`; concurrent calls are committed together:
  one transaction, one COMMIT; a savepoint per caller only after one failed);
- raw `sqlite3` per-call commits: each thread its own connection (busy timeout 5 s, the Store's
  pragmas), `BEGIN IMMEDIATE`, the same two INSERTs, COMMIT.
Aggregate throughput (calls/s over all threads) and p99 call latency, under FULL and NORMAL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Config, Table, checkpoint_ops, fmt_rate, fmt_ratio, fmt_time, say, step_record
from .stores import SQLITE, copy_store, head_template, raw_checkpoint_op, raw_connect

THREADS = (1, 2, 4, 8, 16)
ROUNDS = 4
"""Alternating rounds of each variant per thread count."""
TARGET_THREADS = 8
TARGET_SPEEDUP = 3.0
"""With 8 threads under FULL: ≥ 3× the raw per-call commits' aggregate throughput."""
SINGLE_FLOOR = 0.7
"""One thread: no worse than the single-writer checkpoint target under NORMAL (benchmark 1)."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def drive(ops: list[Callable[[int], None]], seconds: float) -> tuple[float, list[float]]:
    """Run each op in its own thread in a tight loop for `seconds` (started together);
    return (calls per second over all threads, every call's latency)."""
    latencies: list[list[float]] = [[] for _ in ops]
    start = threading.Barrier(len(ops) + 1)
    errors: list[BaseException] = []

    def loop(k: int) -> None:
        op, mine = ops[k], latencies[k]
        clock = time.perf_counter
        start.wait()
        end = clock() + seconds
        n = 0
        try:
            while True:
                began = clock()
                if began >= end:
                    break
                op(n)
                mine.append(clock() - began)
                n += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(len(ops))]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if errors:
        raise errors[0]
    every = [x for mine in latencies for x in mine]
    return len(every) / wall, every


def store_ops(store: Any, runs: list[int]) -> list[Callable[[int], None]]:
    return checkpoint_ops(store, runs, lambda n: step_record(n + 1))


def raw_ops(path: Path, sync: str, runs: list[int], like: Any) -> tuple[list[Any], list[Any]]:
    """Per run its own raw sqlite3 connection committing each call (upstream's checkpoint)."""
    conns = [raw_connect(path, sync, like=like) for _ in runs]
    ops = [
        raw_checkpoint_op(SQLITE, conn, run, lambda n: step_record(n + 1))
        for conn, run in zip(conns, runs, strict=True)
    ]
    return ops, conns


Series = tuple[list[float], list[float]]
"""Per round the aggregate rate, and every call's latency pooled over the rounds."""


def alternate(
    first: list[Callable[[int], None]], second: list[Callable[[int], None]], seconds: float
) -> tuple[Series, Series]:
    """`drive` each set of ops in ROUNDS short alternating rounds (fsync latency on a shared
    disk drifts); return each set's rates per round and pooled latencies."""
    out: tuple[Series, Series] = (([], []), ([], []))
    for _ in range(ROUNDS):
        for ops, (rates, latencies) in zip((first, second), out, strict=True):
            rate, lat = drive(ops, seconds / ROUNDS)
            rates.append(rate)
            latencies += lat
    return out


def run(cfg: Config) -> list[Table]:
    from harness_store import Store

    template = head_template(cfg)
    seconds = cfg.pick(3.0, 1.0)
    table = Table(
        "11. threads of one process checkpointing into one store (group commit)",
        [
            "synchronous",
            "threads",
            "raw per-call commits",
            "raw p99 (max)",
            "Store (group commit)",
            "Store p99 (max)",
            "throughput vs raw",
            "target",
            "result",
        ],
    )
    for sync in ("full", "normal"):
        for threads in THREADS:
            say(f"group commit, synchronous={sync}, {threads} thread(s), {seconds:g} s each")
            store_path = copy_store(template, cfg.work / f"group-store-{sync}-{threads}.sqlite3")
            raw_path = copy_store(template, cfg.work / f"group-raw-{sync}-{threads}.sqlite3")
            store = Store.open(store_path, synchronous=sync)
            setup = Store.open(raw_path, synchronous=sync)
            try:
                store_runs = [store.start_run(f"agent {k}", "f") for k in range(threads)]
                raw_runs = [setup.start_run(f"agent {k}", "f") for k in range(threads)]
                ops, conns = raw_ops(raw_path, sync, raw_runs, like=store)
                s_ops = store_ops(store, store_runs)
                try:
                    (r_rates, r_lat), (s_rates, s_lat) = alternate(ops, s_ops, seconds)
                finally:
                    for conn in conns:
                        conn.close()
            finally:
                store.close()
                setup.close()
            r_rate, s_rate = sum(r_rates) / ROUNDS, sum(s_rates) / ROUNDS
            r_p99, s_p99 = percentile(r_lat, 0.99), percentile(s_lat, 0.99)
            ratio = s_rate / r_rate
            target, verdict = "", ""
            if sync == "full" and threads == TARGET_THREADS:
                target = f"≥ {TARGET_SPEEDUP:.0f}×, p99 ≤ raw"
                verdict = table.check(
                    f"group commit: {threads} threads under FULL ≥ {TARGET_SPEEDUP:.0f}× raw "
                    "per-call commits, p99 no worse",
                    ratio >= TARGET_SPEEDUP and s_p99 <= r_p99,
                )
            elif threads == 1:
                target = f"≥ {SINGLE_FLOOR:.2f}×"
                verdict = table.check(
                    f"group commit: 1 thread under {sync.upper()} ≥ {SINGLE_FLOOR}× raw",
                    ratio >= SINGLE_FLOOR,
                )
            table.add(
                sync.upper(),
                threads,
                fmt_rate(r_rate),
                f"{fmt_time(r_p99)} ({fmt_time(max(r_lat, default=0.0))})",
                fmt_rate(s_rate),
                f"{fmt_time(s_p99)} ({fmt_time(max(s_lat, default=0.0))})",
                fmt_ratio(ratio),
                target,
                verdict,
            )
    table.notes.append(
        f"each thread checkpoints its own run in a tight loop; {seconds:g} s per variant in "
        f"{ROUNDS} alternating rounds (rates averaged, latencies pooled); every connection in "
        "WAL with the Store's pragmas"
    )
    table.notes.append(
        "raw: each thread its own sqlite3 connection, busy timeout 5 s, BEGIN IMMEDIATE + the "
        "two INSERTs + COMMIT per call; waiting writers sleep in SQLite's busy handler"
    )
    table.notes.append(
        "p99 is over every call of every thread; a raw writer that keeps losing the lock makes "
        "few calls, so its waits show in the max more than in the p99"
    )
    return [table]


# --- PostgreSQL: does batching concurrent callers beat per-call autocommit? -----------------


def run_pg(cfg: Config, url: Any) -> list[Table]:
    """Threads checkpointing through one Store on PostgreSQL (each call one autocommitted
    statement on one of the Store's kept connections; the server flushes concurrent commits'
    WAL together by itself) vs the same calls batched by the Store's group-commit coordinator
    onto one connection: BEGIN, each call in its own SAVEPOINT, one COMMIT."""
    import psycopg

    from harness_store import Store
    from harness_store.connector.group import Call, GroupCommit

    from .checkpoint import PG_ONE_STATEMENT
    from .stores import pg_conninfo

    seconds = cfg.pick(3.0, 1.0)
    table = Table(
        "11.1 threads of one process checkpointing on PostgreSQL: per-call autocommit vs batched",
        [
            "threads",
            "Store (per-call autocommit)",
            "p99",
            "batched (one transaction, a savepoint each)",
            "p99",
            "batched vs Store",
        ],
    )
    store = Store.open(url)
    batch_conn = psycopg.connect(pg_conninfo(url), autocommit=True)
    cursor = batch_conn.cursor()

    def run_calls(calls: list[Call]) -> None:
        for call in calls:
            try:
                with batch_conn.transaction():  # a savepoint
                    for sql, params in call.work:
                        cursor.execute(sql, params)
            except psycopg.Error as exc:
                call.error = exc

    def commit(calls: list[Call], late: Callable[[], list[Call]]) -> None:
        with batch_conn.transaction():
            run_calls(calls)
            joined = late()  # those who queued meanwhile share the COMMIT, as on SQLite
            calls += joined
            run_calls(joined)

    group = GroupCommit(commit)
    try:
        for threads in (1, 8, 16):
            say(f"PostgreSQL checkpoints, {threads} thread(s), {seconds:g} s each")
            runs = [store.start_run(f"agent {k}", "f") for k in range(2 * threads)]

            def batched(run: int) -> Callable[[int], None]:
                def op(n: int) -> None:
                    r = step_record(n + 1)
                    row = (run, r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens)
                    group.submit([(PG_ONE_STATEMENT, (*row, run, r.step))], False)

                return op

            s_ops = store_ops(store, runs[:threads])
            b_ops = [batched(run) for run in runs[threads:]]
            (s_rates, s_lat), (b_rates, b_lat) = alternate(s_ops, b_ops, seconds)
            s_rate, b_rate = sum(s_rates) / ROUNDS, sum(b_rates) / ROUNDS
            table.add(
                threads,
                fmt_rate(s_rate),
                fmt_time(percentile(s_lat, 0.99)),
                fmt_rate(b_rate),
                fmt_time(percentile(b_lat, 0.99)),
                fmt_ratio(b_rate / s_rate),
            )
    finally:
        cursor.close()
        batch_conn.close()
        store.close()
    table.notes.append(
        f"{seconds:g} s per variant in {ROUNDS} alternating rounds; the Store keeps up to 16 "
        "connections; the batched variant is an experiment in the benchmark (the Store's "
        "coordinator over one psycopg connection), not a Store mode"
    )
    return [table]
