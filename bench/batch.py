"""Benchmark 2: `Store.checkpoint_steps(run_id, steps)` — a batch in one transaction — on
SQLite (`batch`) and on PostgreSQL (6.2, part of `pg`), one body run per backend.

Baseline: the raw driver (on SQLite on a copy of the same chain-built store): a transaction
(`BEGIN IMMEDIATE` on SQLite), the two checkpoint INSERTs by `executemany` over the same
`StepRecord`s, COMMIT. Both start from the same list of records, so the baseline's tuple
building is timed as the Store's is. On PostgreSQL also raw `COPY`, for the server's ceiling.
"""

from __future__ import annotations

import time
from typing import Any

from .common import (
    Config,
    Table,
    Variant,
    add_variant,
    fmt_ratio,
    interleaved,
    median,
    say,
    speedup,
    step_records,
)
from .stores import (
    INSERT_CHECKPOINT,
    INSERT_STEP,
    POSTGRESQL,
    SQLITE,
    STEP_COLUMNS,
    Backend,
    copy_store,
    head_template,
    pg_copy,
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


def raw_batch_block(backend: Backend, raw: Any, run: int, it: Any) -> Any:
    """One timed raw write of the next batch from `it`: a transaction, the two checkpoint
    INSERTs by `executemany` over the same `StepRecord`s, COMMIT."""
    insert_step, insert_checkpoint = backend.sql(INSERT_STEP), backend.sql(INSERT_CHECKPOINT)

    def block() -> float:
        steps = next(it)
        cursor = raw.cursor()
        start = time.perf_counter()
        if backend.begin is not None:
            cursor.execute(backend.begin)
        cursor.executemany(insert_step, step_rows(run, steps))
        cursor.executemany(insert_checkpoint, [(run, s.step) for s in steps])
        raw.commit()
        elapsed = time.perf_counter() - start
        cursor.close()
        return elapsed

    return block


def copy_batch_block(raw: Any, run: int, it: Any) -> Any:
    """One timed psycopg `COPY` of the next batch from `it` into both tables, committed."""

    def block() -> float:
        steps = next(it)
        start = time.perf_counter()
        with raw.cursor() as cursor:
            pg_copy(cursor, STEP_COLUMNS, step_rows(run, steps))
            pg_copy(
                cursor,
                "checkpoint_events (run_id, step, kind)",
                ((run, s.step, "checkpoint") for s in steps),
            )
        raw.commit()
        return time.perf_counter() - start

    return block


def measure(
    backend: Backend,
    store: Any,
    raw: Any,
    runs: tuple[int, int],
    size: int,
    rounds: int,
    extra: list[Variant],
) -> dict[str, list[float]]:
    """`rounds` (after a warm-up) of a batch of `size` by the Store, by the raw driver and by
    each `extra` variant, interleaved; each variant its own run and its own batches."""
    store_block = store_batch_block(store, runs[0], iter(batches(size, rounds + 1)))
    raw_block = raw_batch_block(backend, raw, runs[1], iter(batches(size, rounds + 1)))
    return interleaved([("store", store_block), ("raw", raw_block), *extra], rounds)


def add_rows(table: Table, backend: Backend, size: int, results: dict[str, list[float]]) -> None:
    """The baseline and the Store against it, with both targets."""
    label = f"{size:,}"
    s, r = results["store"], results["raw"]
    ratio = speedup(r, s)
    rate = size / median(s)
    add_variant(table, [label], f"{backend.raw} executemany (baseline)", r, "1.00×", items=size)
    add_variant(
        table, [label], "Store.checkpoint_steps", s, fmt_ratio(ratio), f"≥ {RATIO_TARGET:.2f}× raw",
        table.check(
            f"{backend.name} checkpoint_steps({size:,}) ≥ {RATIO_TARGET}× raw executemany",
            ratio >= RATIO_TARGET,
        ),
        items=size,
    )  # fmt: skip
    table.add(
        label,
        "",
        "",
        "",
        "",
        "",
        f"≥ {RATE_TARGET:,} steps/s",
        table.check(
            f"{backend.name} checkpoint_steps({size:,}) ≥ {RATE_TARGET:,} steps/s",
            rate >= RATE_TARGET,
        ),
    )


COLUMNS = ["batch", "variant", "median/batch", "steps/s", "noise", "vs raw", "target", "result"]


def run(cfg: Config) -> list[Table]:
    """Benchmark 2 on SQLite: the Store and the baseline each on a copy of the same store."""
    from harness_store import Store

    template = head_template(cfg)
    table = Table(
        "2. checkpoint_steps — one transaction per batch (SQLite file store, WAL)", COLUMNS
    )
    rounds = cfg.pick(7, 3)
    for size in cfg.pick((1_000, 10_000), (1_000,)):
        say(f"checkpoint_steps: {rounds}+1 rounds × batches of {size:,}")
        store = Store.open(copy_store(template, cfg.work / f"batch-store-{size}.sqlite3"))
        sync, mode = store_pragmas(store)
        raw = raw_connect(
            copy_store(template, cfg.work / f"batch-raw-{size}.sqlite3"), "full", like=store
        )
        try:
            results = measure(SQLITE, store, raw, (RUN_ID, RUN_ID), size, rounds, [])
        finally:
            store.close()
            raw.close()
        add_rows(table, SQLITE, size, results)
        table.notes.append(
            f"batch {size:,}: synchronous = {sync} (the Store's default), journal_mode = {mode}, "
            f"raw the same; {rounds} rounds, interleaved"
        )
    return [table]


def run_pg(cfg: Config, url: Any) -> list[Table]:
    """Benchmark 2 on PostgreSQL (6.2, part of `pg`), each variant its own run in the database
    at `url`; and, for the server's ceiling, raw psycopg `COPY` of the same rows into both
    tables."""
    from harness_store import Store
    from harness_store.store.checkpoints import BULK_CHUNK

    table = Table("6.2 checkpoint_steps on PostgreSQL — one transaction per batch", COLUMNS)
    rounds = cfg.pick(5, 3)
    store = Store.open(url)
    raw = POSTGRESQL.connect(url, False)
    try:
        for size in cfg.pick((1_000, 10_000), (1_000,)):
            say(f"PostgreSQL checkpoint_steps: {rounds}+1 rounds × batches of {size:,}")
            store_run = store.start_run(f"batch {size} (Store)", "src/parser.rs")
            raw_run = store.start_run(f"batch {size} (raw)", "src/parser.rs")
            copy_run = store.start_run(f"batch {size} (COPY)", "src/parser.rs")

            copy = copy_batch_block(raw, copy_run, iter(batches(size, rounds + 1)))
            extra: list[Variant] = [("copy", copy)]
            results = measure(POSTGRESQL, store, raw, (store_run, raw_run), size, rounds, extra)
            add_rows(table, POSTGRESQL, size, results)
            c, r = results["copy"], results["raw"]
            add_variant(
                table, [f"{size:,}"], "raw psycopg COPY (the server's ceiling, for reference)",
                c, fmt_ratio(speedup(r, c)), items=size,
            )  # fmt: skip
    finally:
        store.close()
        raw.close()
    table.notes.append(
        f"{rounds} rounds, interleaved; psycopg's executemany pipelines the statements; the "
        f"Store sends one statement per {BULK_CHUNK:,} steps (column arrays in binary, unnested "
        "server-side into both tables)"
    )
    return [table]
