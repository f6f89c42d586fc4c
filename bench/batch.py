"""Benchmark 2: `Store.checkpoint_steps(run_id, steps)` — a batch in one transaction.

Baseline: raw `sqlite3` on a copy of the same chain-built store: `BEGIN IMMEDIATE`, the two
checkpoint INSERTs by `executemany` over the same `StepRecord`s, COMMIT. Both start from the
same list of records, so the baseline's tuple building is timed as the Store's is.
"""

from __future__ import annotations

import time
from typing import Any

from .common import (
    Config,
    Table,
    fmt_rate,
    fmt_ratio,
    fmt_time,
    interleaved,
    median,
    say,
    speedup,
    spread,
    step_records,
)
from .stores import (
    INSERT_CHECKPOINT,
    INSERT_STEP,
    copy_store,
    head_template,
    raw_connect,
    store_pragmas,
)

RUN_ID = 1
RATIO_TARGET = 0.7
RATE_TARGET = 100_000


def batches(size: int, count: int) -> list[list[Any]]:
    return [step_records(1 + i * size, size) for i in range(count)]


def step_rows(run: int, steps: list[Any]) -> list[tuple[Any, ...]]:
    """The steps INSERT's parameters for a batch, as a raw baseline builds them."""
    return [(run, s.step, s.decision, s.result, s.prompt, s.tool_call, s.tokens) for s in steps]


def store_batch_block(store: Any, run: int, it: Any) -> Any:
    """One timed `checkpoint_steps` of the next batch from `it`."""

    def block() -> float:
        steps = next(it)
        start = time.perf_counter()
        store.checkpoint_steps(run, steps)
        return time.perf_counter() - start

    return block


def add_rows(
    table: Table, backend: str, size: int, s: list[float], r: list[float], baseline: str
) -> None:
    label = f"{size:,}"
    ratio = speedup(r, s)
    rate = size / median(s)
    table.add(
        label,
        f"{baseline} (baseline)",
        fmt_time(median(r)),
        fmt_rate(size / median(r)),
        spread(r),
        "1.00×",
        "",
        "",
    )
    table.add(
        label,
        "Store.checkpoint_steps",
        fmt_time(median(s)),
        fmt_rate(rate),
        spread(s),
        fmt_ratio(ratio),
        f"≥ {RATIO_TARGET:.2f}× raw",
        table.check(
            f"{backend} checkpoint_steps({size:,}) ≥ {RATIO_TARGET}× raw executemany",
            ratio >= RATIO_TARGET,
        ),
    )
    table.add(
        label,
        "",
        "",
        "",
        "",
        "",
        f"≥ {RATE_TARGET:,} steps/s",
        table.check(
            f"{backend} checkpoint_steps({size:,}) ≥ {RATE_TARGET:,} steps/s", rate >= RATE_TARGET
        ),
    )


def run(cfg: Config) -> list[Table]:
    from harness_store import Store

    template = head_template(cfg)
    table = Table(
        "2. checkpoint_steps — one transaction per batch (SQLite file store, WAL)",
        ["batch", "variant", "median/batch", "steps/s", "noise", "vs raw", "target", "result"],
    )
    rounds = cfg.pick(7, 3)
    for size in cfg.pick((1_000, 10_000), (1_000,)):
        say(f"checkpoint_steps: {rounds}+1 rounds × batches of {size:,}")
        store = Store.open(copy_store(template, cfg.work / f"batch-store-{size}.sqlite3"))
        sync, mode = store_pragmas(store)
        raw = raw_connect(
            copy_store(template, cfg.work / f"batch-raw-{size}.sqlite3"), "full", like=store
        )
        store_batches, raw_batches = (
            iter(batches(size, rounds + 1)),
            iter(batches(size, rounds + 1)),
        )

        store_block = store_batch_block(store, RUN_ID, store_batches)

        def raw_block(raw: Any = raw, raw_batches: Any = raw_batches) -> float:
            steps = next(raw_batches)
            cursor = raw.cursor()
            start = time.perf_counter()
            cursor.execute("BEGIN IMMEDIATE")
            cursor.executemany(INSERT_STEP, step_rows(RUN_ID, steps))
            cursor.executemany(INSERT_CHECKPOINT, [(RUN_ID, s.step) for s in steps])
            raw.commit()
            elapsed = time.perf_counter() - start
            cursor.close()
            return elapsed

        try:
            results = interleaved([("store", store_block), ("raw", raw_block)], rounds)
        finally:
            store.close()
            raw.close()
        add_rows(table, "SQLite", size, results["store"], results["raw"], "raw sqlite3 executemany")
        table.notes.append(
            f"batch {size:,}: synchronous = {sync} (the Store's default), journal_mode = {mode}, "
            f"raw the same; {rounds} rounds, interleaved"
        )
    return [table]


# --- PostgreSQL ----------------------------------------------------------------------------


def run_pg(cfg: Config, url: Any) -> list[Table]:
    """`checkpoint_steps` on PostgreSQL vs raw psycopg `executemany` in one transaction; and,
    for the server's ceiling, raw psycopg `COPY` of the same rows into both tables."""
    import psycopg

    from harness_store import Store
    from harness_store.store.runs import BULK_CHUNK

    from .checkpoint import PG_INSERT_CHECKPOINT, PG_INSERT_STEP
    from .stores import pg_conninfo

    table = Table(
        "6.2 checkpoint_steps on PostgreSQL — one transaction per batch",
        ["batch", "variant", "median/batch", "steps/s", "noise", "vs raw", "target", "result"],
    )
    rounds = cfg.pick(5, 3)
    store = Store.open(url)
    raw = psycopg.connect(pg_conninfo(url))
    try:
        for size in cfg.pick((1_000, 10_000), (1_000,)):
            say(f"PostgreSQL checkpoint_steps: {rounds}+1 rounds × batches of {size:,}")
            store_run = store.start_run(f"batch {size} (Store)", "src/parser.rs")
            raw_run = store.start_run(f"batch {size} (raw)", "src/parser.rs")
            copy_run = store.start_run(f"batch {size} (COPY)", "src/parser.rs")
            store_batches, raw_batches, copy_batches = (
                iter(batches(size, rounds + 1)) for _ in range(3)
            )

            store_block = store_batch_block(store, store_run, store_batches)

            def raw_block(run: int = raw_run, it: Any = raw_batches) -> float:
                steps = next(it)
                start = time.perf_counter()
                with raw.cursor() as cursor:
                    cursor.executemany(PG_INSERT_STEP, step_rows(run, steps))
                    cursor.executemany(PG_INSERT_CHECKPOINT, [(run, s.step) for s in steps])
                raw.commit()
                return time.perf_counter() - start

            def copy_block(run: int = copy_run, it: Any = copy_batches) -> float:
                steps = next(it)
                start = time.perf_counter()
                with raw.cursor() as cursor:
                    with cursor.copy(
                        "COPY steps (run_id, step, decision, result, prompt, tool_call, tokens) "
                        "FROM STDIN"
                    ) as copy:
                        for row in step_rows(run, steps):
                            copy.write_row(row)
                    with cursor.copy(
                        "COPY checkpoint_events (run_id, step, kind) FROM STDIN"
                    ) as copy:
                        for s in steps:
                            copy.write_row((run, s.step, "checkpoint"))
                raw.commit()
                return time.perf_counter() - start

            results = interleaved(
                [("store", store_block), ("raw", raw_block), ("copy", copy_block)], rounds
            )
            add_rows(
                table,
                "PostgreSQL",
                size,
                results["store"],
                results["raw"],
                "raw psycopg executemany",
            )
            c, r = results["copy"], results["raw"]
            table.add(
                f"{size:,}",
                "raw psycopg COPY (the server's ceiling, for reference)",
                fmt_time(median(c)),
                fmt_rate(size / median(c)),
                spread(c),
                fmt_ratio(speedup(r, c)),
                "",
                "",
            )
    finally:
        store.close()
        raw.close()
    table.notes.append(
        f"{rounds} rounds, interleaved; psycopg's executemany pipelines the statements; the "
        f"Store sends one statement per {BULK_CHUNK:,} steps (column arrays in binary, unnested "
        "server-side into both tables)"
    )
    return [table]
