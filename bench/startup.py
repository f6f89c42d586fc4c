"""Benchmark 16: how soon the command answers — `--version`, a shell's completion request (each
Tab), and `runs` on a small store — beside what a small Typer tool costs.

Each command runs as a shell runs it: a fresh process, timed from start to exit, the cases
alternated round by round so the machine's load falls on all of them alike; the figures are
medians. The floors: `python -c "import typer"`; a one-command Typer app answering the same
completion request (what Typer's own completion costs, before any code of ours); and, for
`runs`, a script that imports SQLAlchemy and Typer and runs the listing's SELECT itself.

Targets: `--version` and completion within 2× `import typer`; `runs` within 1.5× the script.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from .common import Config, Table, median, say

COMMAND = [sys.executable, "-m", "harness_store.cli"]
COMPLETE = {"_HARNESS_STORE_COMPLETE": "complete_bash", "COMP_WORDS": "harness-store ru",
            "COMP_CWORD": "1"}  # fmt: skip
TYPER_APP = """
import typer
app = typer.Typer()
@app.command()
def runs(db: str, limit: int = 20) -> None:
    pass
@app.command()
def trace(db: str, run: int) -> None:
    pass
app(prog_name="harness-store")
"""
SCRIPT = """
import sys, typer
from sqlalchemy import create_engine, text
engine = create_engine("sqlite:///" + sys.argv[1])
with engine.connect() as conn:
    for row in conn.execute(text(
        "SELECT id, status, goal, started_at FROM runs ORDER BY id DESC LIMIT 20"
    )):
        print(*row)
"""


def small_store(cfg: Config) -> Path:
    """A store of 10 runs, made by the Store (cached)."""
    path = cfg.cache / "startup-10-runs.sqlite3"
    if not path.exists():
        from harness_store import StepRecord, Store

        with Store.open(str(path)) as store:
            for n in range(10):
                run = store.start_run(f"goal {n}", "src/parser.rs")
                store.checkpoint_step(run, StepRecord.new(1, "tool", "ok"))
                store.finish_run(run, "success")
        sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    return path


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def run(cfg: Config) -> list[Table]:
    store = small_store(cfg)
    plain = dict(os.environ)
    completing = {**plain, **COMPLETE}
    cases = {
        "import typer": ([sys.executable, "-c", "import typer"], plain),
        "Typer app, completion": ([sys.executable, "-c", TYPER_APP], completing),
        "--version": ([*COMMAND, "--version"], plain),
        "completion": (COMMAND, completing),
        "SQLAlchemy + Typer script": ([sys.executable, "-c", SCRIPT, str(store)], plain),
        "runs": ([*COMMAND, "runs", str(store)], plain),
    }
    rounds = cfg.pick(21, 7)
    say(f"startup: {len(cases)} commands x {rounds} rounds, alternated")
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (argv, env) in cases.items():
            times[name].append(timed(argv, env))
    at = {name: median(values) for name, values in times.items()}
    table = Table(
        "16. start-up: the command beside a small Typer tool (fresh processes, medians)",
        ["command", "median", "floor", "÷ floor", "target", "result"],
    )
    for name, floor, target in (
        ("--version", "import typer", 2.0),
        ("completion", "import typer", 2.0),
        ("completion", "Typer app, completion", None),
        ("runs", "SQLAlchemy + Typer script", 1.5),
    ):
        ratio = at[name] / at[floor]
        verdict = table.check(f"{name} ≤ {target:g}× {floor}", ratio <= target) if target else "—"
        table.add(name, f"{at[name] * 1000:.0f} ms", f"{floor}: {at[floor] * 1000:.0f} ms",
                  f"{ratio:.2f}×", f"≤ {target:g}×" if target else "—", verdict)  # fmt: skip
    table.notes.append(f"{rounds} rounds; load average {os.getloadavg()[0]:.1f} at the end")
    return [table]
