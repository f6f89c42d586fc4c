"""Benchmark 17: maintenance at a year's size — `check`, `check --repair`, `copy` (the store as
the source), `export parquet`, a no-op `upgrade`, `sync` into a SQLite centre (the first pass
and a pass with one new run), `prune --runs` of half the runs and the `compact` after it, on
stores of 10k, 100k and 1M runs (quick: 2k and 20k), each beside a live
writer.

The stores: trees of 10 runs (a random recursive tree per root, depth ≤ 4, as in benchmark 3),
started over a year, every run finished, 2 steps per run with a ~300-byte prompt and a
~100-byte tool call, one memory entry per tree. Built with the raw driver in one transaction
into a chain-built store (indexes made after the rows), as io-harness's format requires, and
cached under --cache. The file is in incremental auto-vacuum, as every store harness_store makes
is, so `compact` gives the pruned half back in slices.

Each command runs as a user runs it, in its own process: its wall time and peak resident
memory (the child's `ru_maxrss`). Beside it a live writer (its own process, a Store on the same
file) checkpoints a step every 20 ms; the table shows the longest a checkpoint took while the
command ran. The last column of the exponents table is how time grows with the store:
log(t₂/t₁) / log(n₂/n₁) between consecutive sizes (1 is linear, 0 is flat).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from .cli import COMMAND
from .common import Config, Table, fmt_bytes, fmt_time, prompt, say, tool_call
from .stores import INSERT_STEP, copy_store, empty_head, remove_store
from .trees import MAX_DEPTH, PER_TREE

FORMAT = 2
"""Bump when the generated store changes, so a stale cache is rebuilt (2: the file in
incremental auto-vacuum, as harness_store makes a store: `compact` gives space back in
slices)."""
STEPS_PER_RUN = 2
SEED = 17
YEAR = 365 * 24 * 3600
START = 1_735_689_600  # 2025-01-01T00:00:00Z
WRITER_EVERY = 0.02

RUN_INSERT = (
    "INSERT INTO runs (id, goal, file, outcome, provider, parent_run_id, depth, status, "
    "started_at) VALUES (?, ?, ?, 'success', 'anthropic', ?, ?, 'completed', ?)"
)
MEMORY_INSERT = (
    "INSERT INTO memory (workspace, key, value, run_id, step, created_at) VALUES (?, ?, ?, ?, 1, ?)"
)


def stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


def build(cfg: Config, runs: int) -> Path:
    """The cached store of `runs` runs (built when absent or stale)."""
    path = cfg.cache / f"scale-{runs}-v{FORMAT}.sqlite3"
    meta = cfg.cache / f"scale-{runs}-v{FORMAT}.json"
    if path.exists() and meta.exists():
        say(f"scale: reusing {path.name}")
        return path
    building = cfg.cache / f"scale-{runs}.building.sqlite3"
    remove_store(building)
    copy_store(empty_head(cfg), building)
    say(f"scale: building {runs:,} runs")
    started = time.perf_counter()
    rng = random.Random(SEED)
    conn = sqlite3.connect(building, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # as harness_store makes a store
    conn.execute("VACUUM")  # an empty store: instant
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
        "AND tbl_name IN ('runs', 'steps', 'memory')"
    ).fetchall()
    conn.execute("BEGIN")
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    trees = runs // PER_TREE
    run_id = 0
    for tree in range(trees):
        at = START + YEAR * tree / trees
        ids: list[tuple[int, int]] = []  # (run id, depth)
        rows = []
        for index in range(PER_TREE):
            run_id += 1
            if index == 0:
                parent, depth = None, 0
            else:
                open_nodes = [(i, d) for i, d in ids if d < MAX_DEPTH]
                parent, parent_depth = rng.choice(open_nodes)
                depth = parent_depth + 1
            ids.append((run_id, depth))
            rows.append(
                (run_id, f"agent task {tree}.{index}", f"src/m{tree % 97}.rs", parent, depth,
                 stamp(at + index))
            )  # fmt: skip
        conn.executemany(RUN_INSERT, rows)
        conn.executemany(
            INSERT_STEP,
            [
                (r[0], n, "tool", f"ok {r[0]}.{n}", prompt(n), tool_call(n), 500 + n)
                for r in rows
                for n in range(1, STEPS_PER_RUN + 1)
            ],
        )
        conn.execute(
            MEMORY_INSERT, (f"/w/{tree % 50}", f"k{tree}", f"note {tree}", rows[0][0], stamp(at))
        )
    for _, sql in indexes:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    built = time.perf_counter() - started
    remove_store(path)
    building.rename(path)
    meta.write_text(json.dumps({"runs": runs, "build_seconds": round(built, 1)}))
    say(f"scale: built {runs:,} runs in {built:.0f} s ({path.stat().st_size / 2**20:.0f} MiB)")
    return path


WRITER = textwrap.dedent(
    """
    import signal, sys, time
    from harness_store import StepRecord, Store
    stop = False
    def halt(*_):
        global stop
        stop = True
    signal.signal(signal.SIGTERM, halt)
    path, every = sys.argv[1], float(sys.argv[2])
    longest, calls, failed = 0.0, 0, 0
    with Store.open(path, backup=False) as store:
        run = store.start_run("live writer", "/live")
        print("ready", flush=True)
        n = 0
        while not stop:
            n += 1
            began = time.perf_counter()
            try:
                store.checkpoint_step(run, StepRecord.new(n, "d", "ok"))
            except Exception as exc:
                failed += 1
                print(type(exc).__name__, exc, file=sys.stderr, flush=True)
            took = time.perf_counter() - began
            longest, calls = max(longest, took), calls + 1
            time.sleep(every)
    print(f"{longest} {calls} {failed}", flush=True)
    """
)


@dataclass
class Measured:
    wall: float
    rss: int
    writer_wait: float | None
    writer_failures: int


def measure(args: list[str], store: Path | None) -> Measured:
    """Run the command `args` beside a live writer on `store` (none when None)."""
    writer = None
    if store is not None:
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store), str(WRITER_EVERY)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert writer.stdout is not None
        if writer.stdout.readline().strip() != "ready":
            raise AssertionError("the live writer did not start")
        time.sleep(0.2)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*COMMAND, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    assert proc.stderr is not None
    error = proc.stderr.read()
    wait, failures = None, 0
    if writer is not None:
        writer.send_signal(signal.SIGTERM)
        out, _ = writer.communicate(timeout=60)
        longest, _, failed = out.split()
        wait, failures = float(longest), int(failed)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise AssertionError(f"{args} exited {code}: {error.strip()}")
    return Measured(wall, usage.ru_maxrss * 1024, wait, failures)


def add_one_run(path: Path) -> None:
    """One new finished run with its steps, written as io-harness writes (raw driver)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        (top,) = conn.execute("SELECT max(id) FROM runs").fetchone()
        conn.execute(RUN_INSERT, (top + 1, "one more", "src/x.rs", None, 0, stamp(time.time())))
        conn.executemany(
            INSERT_STEP,
            [(top + 1, n, "tool", "ok", prompt(n), tool_call(n), 500) for n in (1, 2)],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def run(cfg: Config) -> list[Table]:
    sizes = cfg.pick([10_000, 100_000, 1_000_000], [2_000, 20_000])
    table = Table(
        "17. Maintenance at a year's size (SQLite; each command in its own process, a live "
        "writer beside it)",
        ["runs", "command", "time", "per 1k runs", "peak RSS", "writer's longest wait",
         "writer's failed calls"],
    )  # fmt: skip
    times: dict[str, list[tuple[int, float]]] = {}
    for runs in sizes:
        cached = build(cfg, runs)
        work = cfg.work / f"scale-{runs}"
        work.mkdir(parents=True, exist_ok=True)
        db = copy_store(cached, work / "host.sqlite3")
        centre = work / "centre.sqlite3"
        before = stamp(START + YEAR / 2)
        steps: list[tuple[str, list[str], Path | None]] = [
            ("upgrade (nothing to do)", ["upgrade", str(db)], db),
            ("check", ["check", str(db)], db),
            ("check --repair (nothing to repair)", ["check", "--repair", str(db)], db),
            ("copy (the store as source)", ["copy", str(db), str(work / "copy.sqlite3")], db),
            ("export parquet", ["export", "parquet", str(db), str(work / "dataset")], db),
            ("sync, first pass", ["sync", str(db), str(centre)], centre),
            ("sync, one new run", ["sync", str(db), str(centre)], centre),
            ("prune --runs (half)", ["prune", str(db), "--runs", "--before", before, "--yes"],
             db),
            ("compact (after the prune)", ["compact", str(db), "--yes"], db),
        ]  # fmt: skip
        for name, args, beside in steps:
            if name == "sync, first pass":
                remove_store(centre)
                shutil.copyfile(empty_head(cfg), centre)
            if name == "sync, one new run":
                add_one_run(db)
            if name.startswith("copy"):
                remove_store(work / "copy.sqlite3")
            say(f"scale: {runs:,} runs: {name}")
            got = measure(args, beside)
            times.setdefault(name, []).append((runs, got.wall))
            table.add(
                f"{runs:,}",
                name,
                fmt_time(got.wall),
                fmt_time(got.wall / runs * 1000),
                fmt_bytes(got.rss),
                "—" if got.writer_wait is None else fmt_time(got.writer_wait),
                got.writer_failures,
            )
        shutil.rmtree(work, ignore_errors=True)
    exponents = Table(
        "17b. How time grows with the store: log(t₂/t₁) / log(n₂/n₁) between consecutive sizes",
        ["command", *[f"{a:,} → {b:,}" for a, b in itertools.pairwise(sizes)]],
    )
    for name, points in times.items():
        cells = []
        for (n1, t1), (n2, t2) in itertools.pairwise(points):
            cells.append(f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}")
        exponents.add(name, *cells)
    exponents.notes.append(
        "the one-run sync pass should stay flat (exponent near 0): it sends one run whatever "
        "the source's size; the others may grow linearly (exponent near 1) with the rows they "
        "read, never faster"
    )
    return [table, exponents]


MAINTENANCE_SIZES = os.environ.get("HS_BENCH_SCALE_RUNS", "")
"""Comma-separated sizes (runs) for `maintenance`; default 100,000 and 1,000,000 (quick:
2,000 and 20,000)."""
RSS_TARGET = 200 * 2**20
WAIT_TARGET = 0.25


def maintenance(cfg: Config) -> list[Table]:
    """Table 17c: `check`, `export parquet`, `prune --runs` (the older half) and the `compact`
    after it, each in its own process beside the live writer, `rounds` rounds per size on a
    fresh copy of the cached store each; beside them the writer's longest wait while nothing
    but `harness-store --version` runs (the machine's own noise, same round). Targets: peak
    RSS ≤ 200 MiB and the writer's longest wait ≤ 250 ms at every size."""
    default = cfg.pick([100_000, 1_000_000], [2_000, 20_000])
    sizes = [int(s) for s in MAINTENANCE_SIZES.split(",") if s.strip()] or default
    rounds = cfg.pick(2, 1)
    table = Table(
        "17c. check, export, prune and compact at a year's size (SQLite; each command in its "
        "own process beside a live writer checkpointing every 20 ms; one line a round)",
        ["runs", "command", "round", "time", "peak RSS", "writer's longest wait",
         "failed calls", "load (1 min)"],
    )  # fmt: skip
    names = ("writer alone (beside --version)", "check", "export parquet",
             "prune --runs (older half)", "compact (after the prune)")  # fmt: skip
    got: dict[tuple[str, int], list[Measured]] = {}
    for runs in sizes:
        cached = build(cfg, runs)
        for round_ in range(rounds):
            work = cfg.work / f"maintenance-{runs}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            db = copy_store(cached, work / "host.sqlite3")
            before = stamp(START + YEAR / 2)
            commands = (
                ["--version"],
                ["check", str(db)],
                ["export", "parquet", str(db), str(work / "dataset")],
                ["prune", str(db), "--runs", "--before", before, "--yes"],
                ["compact", str(db), "--yes"],
            )
            for name, args in zip(names, commands, strict=True):
                say(f"scale: {runs:,} runs, round {round_ + 1}: {name}")
                measured = measure(args, db)
                got.setdefault((name, runs), []).append(measured)
                assert measured.writer_wait is not None
                table.add(
                    f"{runs:,}", name, round_ + 1, fmt_time(measured.wall),
                    fmt_bytes(measured.rss), fmt_time(measured.writer_wait),
                    measured.writer_failures, f"{os.getloadavg()[0]:.1f}",
                )  # fmt: skip
            shutil.rmtree(work, ignore_errors=True)
    for name in names[1:]:
        for runs in sizes:
            seen = got[(name, runs)]
            rss = max(m.rss for m in seen)
            wait = max(m.writer_wait or 0.0 for m in seen)
            table.check(f"{name} at {runs:,} runs: peak RSS ≤ 200 MiB", rss <= RSS_TARGET)
            table.check(f"{name} at {runs:,} runs: writer's wait ≤ 250 ms", wait <= WAIT_TARGET)
    exponents = Table(
        "17d. How 17c's times grow with the store: log(t₂/t₁) / log(n₂/n₁), medians of rounds",
        ["command", *[f"{a:,} → {b:,}" for a, b in itertools.pairwise(sizes)]],
    )
    for name in names[1:]:
        cells = []
        for n1, n2 in itertools.pairwise(sizes):
            t1 = statistics.median(m.wall for m in got[(name, n1)])
            t2 = statistics.median(m.wall for m in got[(name, n2)])
            cells.append(f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}")
        exponents.add(name, *cells)
    return [table, exponents] if len(sizes) > 1 else [table]
