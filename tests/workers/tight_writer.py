"""Checkpoint in a tight loop for SECONDS and report every call's wait as one JSON line.

    python tight_writer.py PATH SECONDS SYNCHRONOUS store|plain

`store`: a harness_store `Store` (joins the writers' queue). `plain`: what io-harness does —
a plain `sqlite3` connection with a 5 s busy timeout and `BEGIN IMMEDIATE`, no queue. Prints
`ready`, waits for a line on stdin, then loops; a lock error is counted, not fatal.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time

from harness_store import StepRecord, Store
from harness_store.errors import StoreLockedError


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def main() -> None:
    path, seconds, synchronous, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    waits: list[float] = []
    locked = 0
    if kind == "store":
        store = Store.open(path, upgrade=False, synchronous=synchronous)
        run = store.start_run("tight", "out.txt")

        def write(n: int) -> None:
            store.checkpoint_step(run, StepRecord.new(n, "d", "r").with_trace("p" * 300, "{}", 1))
    else:
        conn = sqlite3.connect(path, timeout=5.0, isolation_level=None)
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("BEGIN IMMEDIATE")
        run = conn.execute("INSERT INTO runs (goal, file) VALUES ('plain', 'out.txt')").lastrowid
        conn.execute("COMMIT")

        def write(n: int) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens)"
                    " VALUES (?, ?, 'd', 'r', ?, '{}', 1)",
                    (run, n, "p" * 300),
                )
                conn.execute(
                    "INSERT INTO checkpoint_events (run_id, step, kind) "
                    "VALUES (?, ?, 'checkpoint')",
                    (run, n),
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    print("ready", flush=True)
    sys.stdin.readline()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        started = time.monotonic()
        try:
            write(n)
        except (StoreLockedError, sqlite3.OperationalError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" not in str(exc):
                raise
            locked += 1
        waits.append(time.monotonic() - started)
    print(
        json.dumps(
            {
                "kind": kind,
                "calls": len(waits),
                "locked": locked,
                "p50": percentile(waits, 0.5),
                "p99": percentile(waits, 0.99),
                "max": max(waits, default=0.0),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
