"""Benchmark 14: many threads checkpointing through one Store on PostgreSQL — is every thread
served, and how close to the driver?

Side by side, for 8 and 16 threads each writing its own run for the same wall time:
- one `Store` shared by all threads (`checkpoint_step`: one autocommitted statement on one of
  the Store's kept connections);
- raw psycopg with as many connections as threads, each thread its own, sending the Store's
  own single statement in autocommit (the floor for this server).
Aggregate throughput, the fewest and the most calls any thread made (a starved thread makes a
handful), and the slowest call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .common import Config, Table, checkpoint_ops, fmt_rate, fmt_ratio, fmt_time, say, step_record
from .stores import POSTGRESQL, pg_database

THREADS = (8, 16)
ROUNDS = 4
"""Alternating rounds of each variant per thread count."""
FAIR = 0.5
"""The fewest calls of any thread ≥ this share of the most."""
SLOWEST = 1.0
"""No call over this many seconds."""
THROUGHPUT = 0.9
"""Aggregate throughput ≥ this share of raw psycopg's with as many connections."""


def drive(
    ops: list[Callable[[int], None]], seconds: float, first: int
) -> tuple[float, list[int], float]:
    """Each op in its own thread in a tight loop for `seconds`, started together, called with
    `first`, `first + 1`, …: (calls per second over all threads, each thread's calls, the
    slowest call)."""
    counts = [0] * len(ops)
    slowest = [0.0] * len(ops)
    start = threading.Barrier(len(ops) + 1)
    errors: list[BaseException] = []

    def loop(k: int) -> None:
        op, clock = ops[k], time.perf_counter
        start.wait()
        end = clock() + seconds
        n, worst = 0, 0.0
        try:
            while (began := clock()) < end:
                op(first + n)
                worst = max(worst, clock() - began)
                n += 1
        except BaseException as exc:
            errors.append(exc)
        counts[k], slowest[k] = n, worst

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
    return sum(counts) / wall, counts, max(slowest)


def run(cfg: Config) -> list[Table]:
    if not cfg.pg:
        raise RuntimeError("the pgthreads benchmark needs --pg URL")
    import os

    with pg_database(cfg.pg, f"hs_bench_threads_{os.getpid()}") as url:
        return [run_pg(cfg, url)]


def run_pg(cfg: Config, url: Any) -> Table:
    from harness_store import Store

    from .checkpoint import PG_ONE_STATEMENT

    seconds = cfg.pick(6.0, 2.0)
    table = Table(
        "14. threads checkpointing through one Store on PostgreSQL, beside raw psycopg",
        [
            "threads",
            "raw psycopg (a connection each)",
            "fewest/most",
            "slowest",
            "Store",
            "fewest/most",
            "slowest",
            "throughput vs raw",
            "target",
            "result",
        ],
    )
    store = Store.open(url)
    try:
        for threads in THREADS:
            say(f"PostgreSQL, {threads} threads through one Store vs raw, {seconds:g} s each")
            runs = [store.start_run(f"agent {k}", "f") for k in range(2 * threads)]
            conns = [POSTGRESQL.connect(url, True) for _ in range(threads)]

            def raw(conn: Any, run: int) -> Callable[[int], None]:
                cursor = conn.cursor()

                def call(n: int) -> None:
                    r = step_record(n + 1)
                    row = (run, r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens)
                    cursor.execute(PG_ONE_STATEMENT, (*row, run, r.step))

                return call

            r_ops = [raw(c, run) for c, run in zip(conns, runs[threads:], strict=True)]
            s_ops = checkpoint_ops(store, runs[:threads], lambda n: step_record(n + 1))
            rounds: dict[str, list[tuple[float, list[int], float]]] = {"raw": [], "store": []}
            try:
                for k in range(ROUNDS):
                    for name, ops in (("raw", r_ops), ("store", s_ops)):
                        # each round's step numbers after the last round's
                        rounds[name].append(drive(ops, seconds / ROUNDS, k * 1_000_000))
            finally:
                for conn in conns:
                    conn.close()
            cells: list[str] = []
            figures = {}
            for name in ("raw", "store"):
                rate = sum(r[0] for r in rounds[name]) / ROUNDS
                share = min(min(r[1]) / max(max(r[1]), 1) for r in rounds[name])
                slowest = max(r[2] for r in rounds[name])
                figures[name] = (rate, share, slowest)
                cells += [fmt_rate(rate), f"{share:.2f}", fmt_time(slowest)]
            rate, share, slowest = figures["store"]
            ratio = rate / figures["raw"][0]
            verdict = table.check(
                f"PostgreSQL, {threads} threads: fewest ≥ {FAIR}× most, no call over "
                f"{SLOWEST:g} s, throughput ≥ {THROUGHPUT}× raw",
                share >= FAIR and slowest <= SLOWEST and ratio >= THROUGHPUT,
            )
            table.add(
                threads,
                *cells,
                fmt_ratio(ratio),
                f"≥ {FAIR}, ≤ {SLOWEST:g} s, ≥ {THROUGHPUT}×",
                verdict,
            )
    finally:
        store.close()
    table.notes.append(
        f"{seconds:g} s per variant in {ROUNDS} alternating rounds; throughput averaged over the "
        "rounds; fewest/most is the worst round's fewest calls of a thread over the most; "
        "slowest is the slowest call of any round"
    )
    table.notes.append(
        "raw: each thread its own psycopg connection in autocommit, sending the Store's own "
        "statement (both rows in one INSERT)"
    )
    return table
