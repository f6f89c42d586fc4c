"""Benchmark 5: reading a long run — `iter_steps` (keyset pages) vs `steps()` (a list).

A store (chain-built, cached) holding a 100,000-step run and a 10,000-step run whose steps
interleave in the file, as concurrent runs' steps do. Time: each read consumed in full, the
variants interleaved; for reference, raw `sqlite3` reading the same rows into `StepRecord`s
with one query. Memory: `tracemalloc` peak of Python allocations while each read is consumed
(records are discarded as they come for `iter_steps`, kept for `steps()`), after a warm-up read.
The target: `iter_steps`' peak does not grow with the run's length.
"""

from __future__ import annotations

import gc
import sqlite3
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .common import (
    Config,
    Table,
    fmt_bytes,
    fmt_rate,
    fmt_ratio,
    fmt_time,
    interleaved,
    median,
    prompt,
    say,
    speedup,
    spread,
    tool_call,
)
from .stores import INSERT_STEP, copy_store, empty_head, remove_store

FORMAT = 1
PEAK_TARGET = 1.5
READ = (
    "SELECT step, decision, result, prompt, tool_call, tokens FROM steps "
    "WHERE run_id = ? ORDER BY step, id"
)


def build(cfg: Config, short: int, long: int) -> tuple[Path, dict[str, int]]:
    """The cached store: run 1 has `short` steps, run 2 `long`, interleaved in the file."""
    path = cfg.cache / f"stream-{short}-{long}-v{FORMAT}.sqlite3"
    runs = {"short": 1, "long": 2}
    if path.exists():
        return path, runs
    building = path.with_suffix(".building")
    remove_store(building)
    copy_store(empty_head(cfg), building)
    say(f"stream: building a store with runs of {short:,} and {long:,} steps")
    conn = sqlite3.connect(building, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN IMMEDIATE")
    for name in ("short", "long"):
        conn.execute(
            "INSERT INTO runs (id, goal, file, status, started_at) VALUES (?, ?, ?, 'completed', "
            "'2025-06-01T12:00:00.000Z')",
            (runs[name], f"a {name} run", "src/parser.rs"),
        )
    every = max(long // short, 1)

    def rows() -> Iterator[tuple[Any, ...]]:
        s = 0
        for n in range(1, long + 1):
            yield (2, n, "tool", f"ok (step {n})", prompt(n), tool_call(n), 700 + n % 900)
            if n % every == 0 and s < short:
                s += 1
                yield (1, s, "tool", f"ok (step {s})", prompt(s), tool_call(s), 700 + s % 900)

    conn.executemany(INSERT_STEP, rows())
    conn.execute("COMMIT")
    conn.close()
    building.rename(path)
    return path, runs


def consume(iterator: Any) -> int:
    n = 0
    for _ in iterator:
        n += 1
    return n


def peak(fn: Callable[[], Any]) -> int:
    """Peak traced Python memory while `fn` runs (its result dropped afterwards)."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = fn()
    top = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del result
    return top - base


def run(cfg: Config) -> list[Table]:
    from harness_store import StepRecord, Store

    short, long = cfg.pick((10_000, 100_000), (2_000, 20_000))
    path, runs = build(cfg, short, long)
    store = Store.open(path, upgrade=False)
    raw = sqlite3.connect(path, isolation_level=None)
    lengths = {"short": short, "long": long}
    rounds = cfg.pick(5, 3)

    def timed_read(kind: str, name: str) -> Callable[[], float]:
        run_id, n = runs[name], lengths[name]

        def block() -> float:
            start = time.perf_counter()
            if kind == "iter":
                got = consume(store.iter_steps(run_id))
            elif kind == "list":
                got = len(store.steps(run_id))
            else:
                got = consume(StepRecord(*row) for row in raw.execute(READ, (run_id,)))
            elapsed = time.perf_counter() - start
            if got != n:
                raise AssertionError(f"{kind} read {got} steps of run {run_id}, expected {n}")
            return elapsed / n

        return block

    say(f"stream: timing reads of {short:,} and {long:,} steps, {rounds}+1 rounds")
    variants = [
        (f"{k}:{name}", timed_read(k, name))
        for name in ("short", "long")
        for k in ("iter", "list", "raw")
    ]
    times = interleaved(variants, rounds)

    say("stream: tracemalloc peaks")
    consume(store.iter_steps(runs["short"]))  # warm-up: compile both page queries once
    peaks = {}
    for name in ("short", "long"):
        peaks[f"iter:{name}"] = peak(lambda r=runs[name]: consume(store.iter_steps(r)))
        peaks[f"list:{name}"] = peak(lambda r=runs[name]: store.steps(r))
        peaks[f"raw:{name}"] = peak(
            lambda r=runs[name]: consume(StepRecord(*row) for row in raw.execute(READ, (r,)))
        )
    store.close()
    raw.close()

    table = Table(
        f"5. Reading a run of {long:,} steps (and {short:,}): iter_steps vs steps()",
        [
            "run",
            "read",
            "median/step",
            "steps/s",
            "noise",
            "vs steps()",
            "peak memory",
            "peak vs short run",
            "target",
            "result",
        ],
    )
    labels = {
        "iter": "Store.iter_steps",
        "list": "Store.steps() (list)",
        "raw": "raw sqlite3 cursor (reference)",
    }
    for name in ("short", "long"):
        for k in ("iter", "list", "raw"):
            t = times[f"{k}:{name}"]
            growth = peaks[f"{k}:long"] / peaks[f"{k}:short"]
            target = verdict = ""
            if k == "iter" and name == "long":
                target = f"≤ {PEAK_TARGET}× (flat)"
                verdict = table.check(
                    "iter_steps peak memory independent of run length "
                    f"({long:,} vs {short:,} steps)",
                    growth <= PEAK_TARGET,
                )
            table.add(
                f"{lengths[name]:,} steps",
                labels[k],
                fmt_time(median(t)),
                fmt_rate(1 / median(t)),
                spread(t),
                fmt_ratio(speedup(times[f"list:{name}"], t)),
                fmt_bytes(peaks[f"{k}:{name}"]),
                fmt_ratio(growth) if name == "long" else "",
                target,
                verdict,
            )
    per_step_growth = median(times["iter:long"]) / median(times["iter:short"])
    table.notes += [
        f"iter_steps time per step, long run / short run: {per_step_growth:.2f}× "
        "(1.0 = linear in the run's length)",
        "peak = tracemalloc peak of Python allocations during the read, above what was live "
        "before it "
        "(SQLite's own page cache is not Python memory and is not counted)",
        f"{rounds} rounds after a warm-up, the six reads interleaved; "
        "'vs steps()' = speed relative to steps()",
    ]
    return [table]
