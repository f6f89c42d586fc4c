"""Benchmark 7: the `harness-store` command on a store of a million steps.

A store (chain-built, cached) whose run 1 has 1,000,000 steps (and a checkpoint event a step,
as upstream writes them), run 2 100,000, and 1,000 short runs besides, some of them run 1's
children. Each command runs as a user runs it — a fresh `python -m harness_store.cli` process,
stdout a pipe that is read to the end — and is timed from start to exit; `trace` is also timed to
its first line of output, and every command's peak resident memory is the child's `ru_maxrss`.
`--version` is the floor: what starting Python and importing the package costs.

Targets (issue #12): `inspect`, `runs` and `tree` answer in under a second; `trace` prints its
first line within a second and its peak memory on the 1M-step run stays within 1.5× of the
100k-step run's (it streams). Time targets are checked over the floor (the `--version` time),
since a loaded machine can take seconds just to start Python.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import Config, Table, fmt_bytes, fmt_time, median, prompt, say, tool_call
from .stores import INSERT_STEP, copy_store, empty_head

FORMAT = 3
COMMAND = [sys.executable, "-m", "harness_store.cli"]
INSERT_EVENT = (
    "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (?, ?, 'checkpoint', NULL)"
)


def build(cfg: Config, big: int, medium: int, short_runs: int) -> Path:
    """The cached store (see the module docstring)."""
    path = cfg.cache / f"cli-{big}-{medium}-{short_runs}-v{FORMAT}.sqlite3"
    if path.exists():
        return path
    building = path.with_suffix(".building")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{building}{suffix}").unlink(missing_ok=True)
    copy_store(empty_head(cfg), building)
    say(f"cli: building a store with runs of {big:,} and {medium:,} steps")
    conn = sqlite3.connect(building, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN IMMEDIATE")
    insert_run = (
        "INSERT INTO runs (id, goal, file, status, started_at, parent_run_id, depth) "
        "VALUES (?, ?, 'src/parser.rs', 'completed', '2025-06-01T12:00:00.000Z', ?, ?)"
    )
    conn.execute(insert_run, (1, "the million-step run", None, 0))
    conn.execute(insert_run, (2, "the 100k-step run", None, 0))
    for n in range(3, short_runs + 3):
        parent = 1 if n % 10 == 0 else None
        conn.execute(
            insert_run, (n, f"short run {n}: " + "fix the parser " * 8, parent, 1 if parent else 0)
        )
    for run_id, count in ((1, big), (2, medium)):
        conn.executemany(
            INSERT_STEP,
            (
                (run_id, n, "tool", f"ok (step {n})", prompt(n), tool_call(n), 700 + n % 900)
                for n in range(1, count + 1)
            ),
        )
        conn.executemany(INSERT_EVENT, ((run_id, n) for n in range(1, count + 1)))
    conn.executemany(
        INSERT_STEP,
        (
            (run_id, s, "tool", "ok", prompt(s), tool_call(s), 100)
            for run_id in range(3, short_runs + 3)
            for s in range(1, 4)
        ),
    )
    conn.execute("COMMIT")
    conn.close()
    building.rename(path)
    return path


def measure(args: list[str], *, first_line: bool = False) -> dict[str, Any]:
    """Run one command; its wall time, time to its first line, peak RSS and output size."""
    start = time.perf_counter()
    proc = subprocess.Popen([*COMMAND, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    first = None
    size = 0
    if first_line:
        line = proc.stdout.readline()
        first = time.perf_counter() - start
        size += len(line)
    while chunk := proc.stdout.read(1 << 20):
        size += len(chunk)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}")
    return {"wall": wall, "first": first, "rss": usage.ru_maxrss * 1024, "bytes": size}


def run(cfg: Config) -> list[Table]:
    big, medium, short_runs = cfg.pick((1_000_000, 100_000, 1_000), (100_000, 10_000, 200))
    path = str(build(cfg, big, medium, short_runs))
    rounds = cfg.pick(3, 1)
    commands: list[tuple[str, list[str], bool]] = [
        ("--version (startup floor)", ["--version"], False),
        ("inspect", ["inspect", path], False),
        ("runs (newest 50)", ["runs", path], False),
        ("runs --all", ["runs", path, "--all"], False),
        ("tree 1", ["tree", path, "1"], False),
        (f"trace 2 ({medium:,} steps)", ["trace", path, "2"], True),
        (f"trace 1 ({big:,} steps)", ["trace", path, "1"], True),
        (f"trace 1 --jsonl ({big:,} steps)", ["trace", path, "1", "--jsonl"], True),
        (
            "trace 1 --from-step 500000 --limit 100",
            ["trace", path, "1", "--from-step", str(big // 2), "--limit", "100"],
            True,
        ),
    ]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in commands}
    say(f"cli: {len(commands)} commands, {rounds} rounds")
    for _ in range(rounds):
        for name, args, first in commands:
            results[name].append(measure(args, first_line=first))

    table = Table(
        f"7. The harness-store command on a store of {big:,} steps ({short_runs + 2:,} runs)",
        [
            "command",
            "wall (median)",
            "over the floor",
            "first line",
            "peak RSS",
            "output",
            "target",
        ],
    )
    floor = median([r["wall"] for r in results[commands[0][0]]])
    peaks = {}
    for name, _, first in commands:
        rows = results[name]
        wall = median([r["wall"] for r in rows])
        first_at = median([r["first"] for r in rows]) if first else None
        rss = max(r["rss"] for r in rows)
        peaks[name] = rss
        # The targets are for the command's own work: the startup floor (Python and the
        # imports, slow on a loaded machine) is taken off.
        if name.startswith(("inspect", "runs (", "tree")):
            target = table.check(f"cli: {name} under 1 s on {big:,} steps", wall - floor < 1.0)
        elif first and "from-step" not in name:
            target = table.check(f"cli: {name} first line under 1 s", (first_at or 0) - floor < 1.0)
        else:
            target = ""
        table.add(
            name,
            fmt_time(wall),
            fmt_time(max(wall - floor, 0.0)),
            fmt_time(first_at) if first_at is not None else "—",
            fmt_bytes(rss),
            fmt_bytes(rows[0]["bytes"]),
            target,
        )
    ratio = peaks[f"trace 1 ({big:,} steps)"] / peaks[f"trace 2 ({medium:,} steps)"]
    verdict = table.check(
        f"cli: trace peak memory at {big:,} steps ≤ 1.5× at {medium:,}", ratio <= 1.5
    )
    table.notes.append(
        f"trace peak memory, {big:,} steps vs {medium:,}: {ratio:.2f}× ({verdict}); the time of "
        "a whole trace is bound by formatting and writing its lines."
    )
    return [table]
