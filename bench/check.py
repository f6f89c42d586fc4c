"""Benchmark: `Store.check` on a large store (full: 1,000 runs × 1,000 steps = 1,000,000 steps).

The store: every step checkpointed (a `steps` row and its checkpoint event), with a provider
call per ten steps, built with raw `sqlite3` `executemany` in one transaction into a store made
by the chain (on PostgreSQL: the same rows through `COPY`), cached between runs (SQLite).

Timed, side by side in one run: `check()` as a whole, and on SQLite `PRAGMA integrity_check`
on its own (most of what `check` costs) and `PRAGMA foreign_key_check` on its own. Target:
`check` under 30 s on SQLite for 1,000,000 steps, and the same order on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .common import Config, Table, fmt_time, interleaved, median, prompt, say, spread, tool_call
from .stores import (
    INSERT_CHECKPOINT,
    INSERT_STEP,
    STEP_COLUMNS,
    copy_store,
    empty_head,
    pg_copy,
    pg_database,
)

FORMAT = 1
"""Bump when the generated store changes, so a stale cache is rebuilt."""
TARGET = 30.0
"""Seconds `check` may take on the full SQLite store."""
INSERT_CALL = (
    "INSERT INTO provider_calls (run_id, step, attempt, provider, model, prompt_tokens, "
    "completion_tokens, latency_ms, at) VALUES (?, ?, 0, 'bench', 'model-a', 900, 80, 500, "
    "'2026-01-01T00:00:00.000Z')"
)


def rows(runs: int, steps: int) -> Iterator[tuple[int, int, str, str, str, str, int]]:
    for run in range(1, runs + 1):
        for step in range(1, steps + 1):
            n = run * steps + step
            yield (run, step, "tool", f"ok {n}", prompt(n), tool_call(n), 700 + n % 900)


def build_sqlite(cfg: Config, runs: int, steps: int) -> Path:
    path = cfg.cache / f"check-{FORMAT}-{runs}x{steps}.sqlite3"
    if path.exists():
        return path
    say(f"building a {runs * steps:,}-step store (once; cached in {cfg.cache})")
    partial = copy_store(empty_head(cfg), cfg.work / "check-build.sqlite3")
    conn = sqlite3.connect(partial, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO runs (id, goal, file, status) VALUES (?, 'bench', 'f.txt', 'completed')",
        [(r,) for r in range(1, runs + 1)],
    )
    conn.executemany(INSERT_STEP, rows(runs, steps))
    conn.executemany(
        INSERT_CHECKPOINT, ((r, s) for r in range(1, runs + 1) for s in range(1, steps + 1))
    )
    conn.executemany(
        INSERT_CALL, ((r, s) for r in range(1, runs + 1) for s in range(1, steps + 1, 10))
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    partial.replace(path)
    return path


def time_sqlite(path: Path, rounds: int) -> dict[str, list[float]]:
    """`check()`, `integrity_check` and `foreign_key_check` on their own, interleaved for
    `rounds` rounds after a warm-up one (the page cache is warm for all three alike)."""
    from harness_store import Store

    uri = f"file:{path}?mode=ro"

    def pragma(statement: str) -> Callable[[], float]:
        def go() -> float:
            raw = sqlite3.connect(uri, uri=True)
            try:
                started = time.perf_counter()
                found = raw.execute(statement).fetchall()
                elapsed = time.perf_counter() - started
            finally:
                raw.close()
            assert found in ([], [("ok",)]), found
            return elapsed

        return go

    def check() -> float:
        with Store.open(path, read_only=True) as store:
            started = time.perf_counter()
            report = store.check()
            elapsed = time.perf_counter() - started
        assert report.healthy, report.findings
        return elapsed

    return interleaved(
        [
            ("check", check),
            ("integrity", pragma("PRAGMA integrity_check")),
            ("foreign_keys", pragma("PRAGMA foreign_key_check")),
        ],
        rounds,
    )


def time_postgresql(cfg: Config, runs: int, steps: int) -> float:
    from sqlalchemy import create_engine

    from harness_store import Store
    from harness_store.schema import migrate

    assert cfg.pg is not None
    with pg_database(cfg.pg, "hs_bench_check") as url:
        migrate.upgrade(url, backup=False)
        engine = create_engine(url)
        say(f"loading {runs * steps:,} steps into PostgreSQL (COPY)")
        with engine.begin() as conn:
            driver = conn.connection.driver_connection
            with driver.cursor() as cursor:  # type: ignore[union-attr]
                pg_copy(
                    cursor,
                    "runs (id, goal, file, status)",
                    ((r, "bench", "f.txt", "completed") for r in range(1, runs + 1)),
                )
                pg_copy(cursor, STEP_COLUMNS, rows(runs, steps))
                pg_copy(
                    cursor,
                    "checkpoint_events (run_id, step, kind)",
                    ((r, s, "checkpoint") for r in range(1, runs + 1) for s in range(1, steps + 1)),
                )
                cursor.execute("SELECT setval('runs_id_seq', %s)", (runs,))
                cursor.execute("ANALYZE")
        engine.dispose()
        with Store.open(url) as store:
            started = time.perf_counter()
            report = store.check()
            elapsed = time.perf_counter() - started
        assert report.healthy, report.findings
        return elapsed


def run(cfg: Config) -> list[Table]:
    runs, steps = cfg.pick((1000, 1000), (100, 1000))
    total = runs * steps
    table = Table(
        f"check on a {total:,}-step store ({runs:,} runs)",
        ["backend", "what", "time", "target"],
    )
    path = build_sqlite(cfg, runs, steps)
    rounds = cfg.pick(3, 1)
    times = time_sqlite(path, rounds)
    check_s = median(times["check"])
    scaled = TARGET * total / 1_000_000
    share = median([i / c for i, c in zip(times["integrity"], times["check"], strict=True)])
    shown = f"{fmt_time(check_s)} {spread(times['check'])}"
    verdict = table.check(f"check under {scaled:.0f} s", check_s < scaled)
    table.add("SQLite", "Store.check() (8 checks)", shown, verdict)
    table.add("SQLite", "PRAGMA integrity_check alone", fmt_time(median(times["integrity"])), "")
    table.add("SQLite", "PRAGMA foreign_key_check alone", fmt_time(median(times["foreign_keys"])),
              "")  # fmt: skip
    table.notes.append(
        f"SQLite file: {path.stat().st_size / 1e6:,.0f} MB; medians of {rounds} interleaved "
        f"rounds; integrity_check alone is {share:.0%} of check's time (median of the rounds)"
    )
    if cfg.pg:
        pg_s = time_postgresql(cfg, runs, steps)
        table.add("PostgreSQL", "Store.check()", fmt_time(pg_s), "same order as SQLite")
    else:
        table.notes.append("PostgreSQL skipped (no --pg URL)")
    return [table]
