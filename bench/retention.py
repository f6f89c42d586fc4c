"""Benchmark 9: what removing history costs (retention, io-harness 0.58).

Upstream's method (docs/MEASUREMENTS.md of v0.58.0, `retention_cost`): a store on disk holding
ten sessions of one turn and one run each, the given steps per run and one ledger observation
per step; one session is removed and timed — and a sweep of all ten against ten
`delete_session` calls. Timed here through `Store.delete_session` / `sweep_sessions` on SQLite
(and on PostgreSQL with --pg), beside upstream's published figures (Apple M1, rusqlite bundled:
another machine, so only the shape compares).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .common import Config, Table, fmt_time, median, pg_database, remove_store, say

SESSIONS = 10
UPSTREAM_ONE = {10: "1.140 ms", 100: "1.564 ms", 1000: "5.832 ms"}
UPSTREAM_SWEEP = {10: "2.286 ms", 100: "3.681 ms"}
UPSTREAM_LOOP = {10: "11.234 ms", 100: "14.690 ms"}


def fill(store: Any, steps: int) -> list[int]:
    """Ten sessions of one turn and one run, `steps` steps and observations per run."""
    from harness_store import Observation, ObsKind, StepRecord

    sessions = []
    for i in range(SESSIONS):
        with store.transaction():
            session = store.create_session(f"/ws/{i}")
            run = store.start_run(f"turn {i}", "NOTES.md")
            store.record_turn(session, None, run, f"prompt {i}")
            for step in range(1, steps + 1):
                store.checkpoint_step(run, StepRecord(step, "read_file", "ok", "p", "{}", 5))
            store.record_observations(
                run,
                [Observation(s, ObsKind.READ, "a.rs", "fn main() {}") for s in range(1, steps + 1)],
            )
            store.finish_run(run, "passed")
        sessions.append(session)
    return sessions


def each_target(cfg: Config, name: str) -> Iterator[tuple[str, Any]]:
    path = cfg.work / f"{name}.sqlite3"
    remove_store(path)
    yield "SQLite", str(path)
    remove_store(path)
    if cfg.pg:
        with pg_database(cfg.pg, f"hs_bench_{name}") as url:
            yield "PostgreSQL", url


def run(cfg: Config) -> list[Table]:
    from harness_store import Store

    rounds = cfg.pick(7, 3)
    one = Table(
        "9. Removing one session from a store of ten (retention)",
        ["backend", "steps in the session", "rows removed", "bytes removed", "time", "upstream"],
    )
    sweep = Table(
        "9.1 A sweep of ten sessions against ten delete_session calls (retention)",
        ["backend", "steps per session", "sweep_sessions", "ten delete_session", "upstream"],
    )
    for steps in (10, 100, 1000):
        for backend, target in each_target(cfg, f"retention_{steps}"):
            times, last = [], None
            with Store.open(target, backup=False) as store:
                for r in range(rounds):
                    say(f"retention: {backend}, {steps} steps, round {r + 1}")
                    sessions = fill(store, steps)
                    start = time.perf_counter()
                    last = store.delete_session(sessions[r % SESSIONS])
                    times.append(time.perf_counter() - start)
                    store.sweep_sessions("9999")  # empty again for the next round
            assert last is not None
            one.add(backend, steps, f"{last.rows:,}", f"{last.bytes:,}", fmt_time(median(times)),
                    UPSTREAM_ONE[steps])  # fmt: skip
            if steps == 1000:
                continue
            swept, looped = [], []
            with Store.open(target, backup=False) as store:
                for _ in range(rounds):
                    fill(store, steps)
                    start = time.perf_counter()
                    store.sweep_sessions("9999")
                    swept.append(time.perf_counter() - start)
                    sessions = fill(store, steps)
                    start = time.perf_counter()
                    for session in sessions:
                        store.delete_session(session)
                    looped.append(time.perf_counter() - start)
            sweep.add(backend, steps, fmt_time(median(swept)), fmt_time(median(looped)),
                      f"{UPSTREAM_SWEEP[steps]} vs {UPSTREAM_LOOP[steps]}")  # fmt: skip
    one.notes.append(
        "Upstream: docs/MEASUREMENTS.md of v0.58.0 (Apple M1, rusqlite 0.40.1 bundled, release "
        "build). Each removal here counts what it removes first (the `Pruned` report) and runs "
        "in one transaction with a durable commit (synchronous=FULL). Median of the rounds "
        "on one open Store (a Store's first call builds its statements, ~0.2 s)."
    )
    return [one, sweep]
