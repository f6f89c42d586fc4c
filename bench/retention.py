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

from .common import Config, Table, fmt_time, median, say
from .stores import backends, scratch_target

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
    """(backend name, a new store's target) on each backend of this run, in turn."""
    for backend in backends(cfg):
        with scratch_target(cfg, backend, name) as target:
            yield backend.name, target


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


# --- 9.2: pruning half of a store of runs ------------------------------------------------

WRITER = """
import json, sys, time
from pathlib import Path
from harness_store import Store, StepRecord
from harness_store.errors import StoreLockedError
stop = Path(sys.argv[2])
with Store.open(sys.argv[1], backup=False) as store:
    run = store.start_run("live", "plan.toml")
    print("ready", flush=True)
    waits, step, failed = [], 0, 0
    while not stop.exists():
        step += 1
        start = time.perf_counter()
        try:
            store.checkpoint_step(run, StepRecord(step, "decide", "ok", "p", "{}", 1))
        except StoreLockedError:
            failed += 1
        waits.append(time.perf_counter() - start)
        time.sleep(0.002)
print(json.dumps({"max": max(waits), "median": sorted(waits)[len(waits) // 2], "n": len(waits),
                  "failed": failed}))
"""
"""A live driver beside the prune: checkpoints one step at a time, timing each (and counting
the checkpoints that failed with `StoreLockedError`, waiting past the busy timeout)."""


def fill_runs(store: Any, runs: int, steps: int) -> list[int]:
    """`runs` finished runs of `steps` checkpointed steps each, the first half dated 2020."""
    from sqlalchemy import update

    from harness_store import StepRecord
    from harness_store import models as m

    ids = []
    for i in range(runs):
        run = store.start_run(f"goal {i}", "plan.toml")
        store.checkpoint_steps(
            run, [StepRecord(s, "read_file", "ok " * 8, "p", "{}", 5) for s in range(1, steps + 1)]
        )
        store.finish_run(run, "passed")
        ids.append(run)
    with store._write() as conn:
        old = ids[: runs // 2]
        for part in range(0, len(old), 500):
            conn.execute(
                update(m.Run)
                .where(m.Run.id.in_(old[part : part + 500]))
                .values(started_at="2020-01-01T00:00:00.000Z")
            )
    return ids[: runs // 2]


def plain_delete(store: Any, runs: list[int]) -> None:
    """The baseline: one `DELETE … WHERE run_id IN (…)` per run-keyed table and the runs, in
    one transaction, with no check, count or batching."""
    from sqlalchemy import text

    from harness_store.store.retention_rows import RUN_TABLES

    ids = ", ".join(map(str, runs))
    with store._write() as conn:
        for name, key in [*RUN_TABLES, ("hs_spend_runs", "run_id"), ("runs", "id")]:
            conn.execute(text(f"DELETE FROM {name} WHERE {key} IN ({ids})"))


def beside_a_writer(target: str, work: Any, action: Any) -> tuple[float, dict[str, float]]:
    """Time `action()` while a writer process checkpoints; its time and the writer's waits."""
    import json
    import subprocess
    import sys

    stop = work / "writer.stop"
    stop.unlink(missing_ok=True)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, target, str(stop)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    start = time.perf_counter()
    action()
    took = time.perf_counter() - start
    time.sleep(0.3)
    stop.touch()
    out, _ = writer.communicate(timeout=120)
    return took, json.loads(out)


def run_prune(cfg: Config, size: tuple[int, int] | None = None) -> list[Table]:
    """Benchmark 9.2; `size` (runs, steps per run) instead of the issue's 1,000 × 1,000."""
    from harness_store import Store

    runs, steps = size or cfg.pick((1000, 1000), (100, 100))
    table = Table(
        f"9.2 Pruning half of a store of {runs:,} runs × {steps:,} steps (prune_runs)",
        ["backend", "how", "runs", "rows", "time", "writer's worst wait", "writer's median"],
    )
    for backend, target in each_target(cfg, "prune_runs"):
        for how in ("prune_runs", "plain DELETE"):
            say(f"prune: {backend}, {how}: filling {runs} runs × {steps} steps")
            with Store.open(target, backup=False) as store:
                old = fill_runs(store, runs, steps)
                rows = store.prune_runs(before="2021-01-01", dry_run=True).rows

                def act(store: Any = store, old: list[int] = old, how: str = how) -> None:
                    if how == "prune_runs":
                        assert store.prune_runs(before="2021-01-01").runs == len(old)
                    else:
                        plain_delete(store, old)

                say(f"prune: {backend}, {how}")
                took, waits = beside_a_writer(str(target), cfg.work, act)
                table.add(backend, how, f"{len(old):,}", f"{rows:,}", fmt_time(took),
                          fmt_time(waits["max"]), fmt_time(waits["median"]))  # fmt: skip
                store.prune_runs(before="9999-01-01")  # empty for the next variant
    table.notes.append(
        "prune_runs decides, counts and deletes in batches of about 20,000 rows, each one "
        "transaction with its runs locked; the plain DELETE is one transaction over the same "
        "rows with nothing checked. The writer is another process checkpointing one step "
        "every 2 ms into a live run throughout."
    )
    return [table]


# --- 9.3: pruning the oldest tenth of a big store --------------------------------------

SCALE_SIZES = (10_000, 100_000, 1_000_000)
"""Runs in the stores 9.3 prunes the oldest tenth of (`--quick`: the first only)."""


def build_runs(cfg: Config, runs: int) -> Any:
    """A store at head of `runs` finished runs as a host that ran agents all year leaves it:
    every tenth run a root with a sub-agent child (the rest roots alone), one checkpointed
    step each; the oldest tenth started in 2020, the rest in 2026. Raw inserts in one
    transaction, built once into the cache and copied for each use."""
    import sqlite3

    from harness_store import Store

    built = cfg.cache / f"prune_scale_{runs}.sqlite3"
    if not built.exists():
        say(f"prune scale: building {runs:,} runs")
        partial = built.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        Store.open(partial, backup=False).close()
        con = sqlite3.connect(partial)
        with con:
            old = runs // 10
            rows = []
            for i in range(1, runs + 1):
                parent = i - 1 if i % 10 == 0 else None
                stamp = "2020-01-01T00:00:00.000Z" if i <= old else "2026-06-01T00:00:00.000Z"
                rows.append((i, f"goal {i}", "plan.toml", "passed", parent, int(bool(parent)),
                             "completed", stamp))  # fmt: skip
            con.executemany(
                "INSERT INTO runs (id, goal, file, outcome, parent_run_id, depth, status, "
                "started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            con.executemany(
                "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
                "VALUES (?, 1, 'read_file', 'ok ok ok', 'p', '{}', 5)",
                [(i,) for i in range(1, runs + 1)],
            )
        con.close()
        partial.rename(built)
    return built


def run_prune_scale(cfg: Config, sizes: tuple[int, ...] | None = None) -> list[Table]:
    """Benchmark 9.3: `prune_runs` of the oldest tenth of stores of 10k to 1M runs (SQLite),
    beside a live writer checkpointing every 2 ms: the prune's time, time per pruned run,
    and the writer's longest and median wait for its commit."""
    import shutil

    from harness_store import Store

    sizes = sizes or cfg.pick(SCALE_SIZES, SCALE_SIZES[:1])
    table = Table(
        "9.3 Pruning the oldest tenth of a big store (prune_runs, SQLite)",
        ["runs in the store", "runs pruned", "batches", "time", "per pruned run",
         "writer's worst wait", "writer's median", "writer's failed checkpoints"],
    )  # fmt: skip
    for runs in sizes:
        target = cfg.work / f"prune_scale_{runs}.sqlite3"
        shutil.copyfile(build_runs(cfg, runs), target)
        batches = [0]
        with Store.open(target, backup=False) as store:
            pruned: list[Any] = []

            def act(store: Any = store, pruned: list[Any] = pruned, batches: Any = batches) -> None:
                def count(done: int, total: int) -> None:
                    batches[0] += 1

                pruned.append(store.prune_runs(before="2021-01-01", progress=count))

            say(f"prune scale: {runs:,} runs")
            took, waits = beside_a_writer(str(target), cfg.work, act)
        n = pruned[0].runs
        table.add(f"{runs:,}", f"{n:,}", batches[0], fmt_time(took), fmt_time(took / max(n, 1)),
                  fmt_time(waits["max"]), fmt_time(waits["median"]), waits["failed"])  # fmt: skip
        remove = [target, *(target.with_name(target.name + s) for s in ("-wal", "-shm"))]
        for path in remove:
            path.unlink(missing_ok=True)
    table.notes.append(
        "Each store: every tenth run a root with a sub-agent child, one step each, the oldest "
        "tenth dated 2020 and pruned (`before='2021-01-01'`), in batches of at most 400 runs. "
        "The writer is another process checkpointing one step every 2 ms into a live run."
    )
    return [table]
