"""Benchmark 17e: what a live writer waits for beside a prune and a compact at a year's size.

On benchmark 17's stores (10k, 100k and 1M runs; quick: 2k and 20k), the prune runs in this
process with each of its write transactions timed (from `BEGIN` to `COMMIT`, read from the
driver's trace), beside the live writer of 17c in its own process (a Store checkpointing a
step every 20 ms), which logs every call over 30 ms with when it began. The prune takes the
runs started before a share of the year (`HS_BENCH_TURN_RUNS`, `runs:share` pairs; default
the older half of 10k, a fifth of 100k and a fiftieth of 1M: 5,000, 20,000 and 20,000 runs),
so the 1M store's rounds take minutes, not an hour; then `compact` gives back what it freed.
Two rounds a size (quick: one). The table: runs pruned, time per pruned run, the write
transactions (how many, runs in each, median and longest), the writer's longest wait beside
the prune and beside the compact, its failed calls, and this process's peak RSS.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool

from harness_store import Store

from .common import Config, Table, fmt_time, say
from .scale import START, WAIT_TARGET, YEAR, build, stamp
from .stores import copy_store

TURN_RUNS = os.environ.get("HS_BENCH_TURN_RUNS", "")

WRITER = textwrap.dedent(
    """
    import json, signal, sys, time
    from harness_store import StepRecord, Store
    stop = False
    def halt(*_):
        global stop
        stop = True
    signal.signal(signal.SIGTERM, halt)
    slow, failed = [], 0
    with Store.open(sys.argv[1], backup=False) as store:
        run = store.start_run("live writer", "/live")
        print("ready", flush=True)
        n = 0
        while not stop:
            n += 1
            began = time.monotonic()
            try:
                store.checkpoint_step(run, StepRecord.new(n, "d", "ok"))
            except Exception:
                failed += 1
            took = time.monotonic() - began
            if took > 0.03:
                slow.append((began, took))
            time.sleep(0.02)
    print(json.dumps({"slow": slow, "failed": failed}), flush=True)
    """
)


@contextmanager
def write_spans(path: Path) -> Iterator[list[tuple[float, float]]]:
    """(began, committed), monotonic, of each write transaction on a connection to `path`."""
    spans: list[tuple[float, float]] = []
    resolved = str(path.resolve())
    began = [0.0]

    def statement(sql: str) -> None:
        word = sql.lstrip().split(None, 2)[:2]
        if word[:2] == ["BEGIN", "IMMEDIATE"]:
            began[0] = time.monotonic()
        elif word[:1] == ["COMMIT"] and began[0]:
            spans.append((began[0], time.monotonic()))
            began[0] = 0.0

    def watch(raw: Any, *_: Any) -> None:
        files = (
            [] if not isinstance(raw, sqlite3.Connection) else raw.execute("PRAGMA database_list")
        )
        if resolved in [str(r[2]) for r in files]:
            raw.set_trace_callback(statement)

    event.listen(Pool, "connect", watch)
    event.listen(Pool, "checkout", watch)
    try:
        yield spans
    finally:
        event.remove(Pool, "connect", watch)
        event.remove(Pool, "checkout", watch)


def longest(slow: list[list[float]], start: float, end: float) -> float:
    """The writer's longest call that overlapped [start, end] (0 when none passed 30 ms)."""
    return max([took for began, took in slow if began <= end and began + took >= start] or [0.0])


def run(cfg: Config) -> list[Table]:
    pairs = [p.split(":") for p in TURN_RUNS.split(",") if p.strip()]
    sizes = [(int(n), float(s)) for n, s in pairs] or cfg.pick(
        [(10_000, 0.5), (100_000, 0.2), (1_000_000, 0.02)], [(2_000, 0.5), (20_000, 0.5)]
    )
    table = Table(
        "17e. A prune and the compact after it beside a live writer (SQLite; the prune's "
        "write transactions timed in process; one line a round)",
        ["store", "pruned", "per pruned run", "transactions", "runs each (median)",
         "transaction (median / longest)", "writer's longest wait: prune / compact",
         "failed calls", "peak RSS", "load (1 min)"],
    )  # fmt: skip
    worst = 0.0
    for runs, share in sizes:
        cached = build(cfg, runs)
        for round_ in range(cfg.pick(2, 1)):
            say(f"turns: {runs:,} runs, round {round_ + 1}")
            db = copy_store(cached, cfg.work / "turns.sqlite3")
            writer = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True
            )
            assert writer.stdout is not None
            if writer.stdout.readline().strip() != "ready":
                raise AssertionError("the live writer did not start")
            time.sleep(0.2)
            with write_spans(db) as spans, Store.open(db, backup=False) as store:
                began = time.monotonic()
                pruned = store.prune_runs(before=stamp(START + YEAR * share))
                pruning = time.monotonic() - began, len(spans)
                store.compact()
                compacted = time.monotonic()
            writer.send_signal(signal.SIGTERM)
            out, _ = writer.communicate(timeout=60)
            got = json.loads(out)
            held = [end - start for start, end in spans[: pruning[1]]]
            waits = (
                longest(got["slow"], began, began + pruning[0]),
                longest(got["slow"], began + pruning[0], compacted),
            )
            worst = max(worst, *waits)
            table.add(
                f"{runs:,}", f"{pruned.runs:,}",
                fmt_time(pruning[0] / max(pruned.runs, 1)), len(held),
                f"{pruned.runs / max(len(held), 1):.0f}",
                f"{fmt_time(statistics.median(held))} / {fmt_time(max(held))}",
                " / ".join(fmt_time(w) if w else "< 30 ms" for w in waits), got["failed"],
                f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB",
                f"{os.getloadavg()[0]:.1f}",
            )  # fmt: skip
            db.unlink()
    table.check("writer's longest wait ≤ 250 ms", worst <= WAIT_TARGET)
    return [table]
