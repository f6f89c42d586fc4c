"""Benchmark 16: how soon the command answers — `--version`, a shell's completion request (each
Tab), and `runs` on a small store — beside what a small Typer tool costs.

Each command runs as a shell runs it: a fresh process, timed from start to exit, the cases
alternated round by round so the machine's load falls on all of them alike; the figures are
medians, of wall time and of the process's CPU time (user + system, which other processes on
the machine disturb far less). The package's own modules are byte-compiled first, as
installing it does (`pip` compiles them; an editable checkout under PYTHONDONTWRITEBYTECODE
would otherwise compile them again in every process).

The floors: `python -c "import typer"`; a two-command Typer app answering the same completion
request (what Typer's own completion costs, before any code of ours); and, for `runs`, three:
a script that imports SQLAlchemy and Typer and runs the listing's SELECT itself; the same
SELECT as a Typer app's command (what parsing a command line costs: Typer loads pydantic to
convert its parameters); and that app importing the package's models and running the SELECT
over them (what any reader built on the declarative models pays: the ORM, the 37 mapped
classes and their mappers' set-up, which the Store's statements are built from).

Beside them, the tools a user runs on the same store: `sqlite-utils rows STORE runs` (the
`bench` extra installs it; without it the row says so and is left out) and `alembic current`
(the package's own chain, `-x db=STORE`).

Targets: `--version` within 2× `import typer`; completion within 1.5× the Typer app's
completion; `runs` within 1.5× the app over the models, and within 1.0× `sqlite-utils rows`.
The older target, `runs` within 1.5× the bare script, is shown too: it is below the two other
floors' own cost (see the benchmarks page, "How soon the command answers").
"""

from __future__ import annotations

import compileall
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from .common import REPO, Config, Table, median, say

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
TYPER_SELECT = """
import sys, typer
from sqlalchemy import create_engine, text
app = typer.Typer()
@app.command()
def runs(db: str, limit: int = 20) -> None:
    engine = create_engine("sqlite:///" + db)
    with engine.connect() as conn:
        for row in conn.execute(text(
            "SELECT id, status, goal, started_at FROM runs ORDER BY id DESC LIMIT :limit"
        ), {"limit": limit}):
            print(*row)
@app.command()
def trace(db: str, run: int) -> None:
    pass
app(prog_name="harness-store")
"""
TYPER_MODELS = """
import sys, typer
from sqlalchemy import create_engine, select
from harness_store.models import Run
app = typer.Typer()
@app.command()
def runs(db: str, limit: int = 20) -> None:
    engine = create_engine("sqlite:///" + db)
    statement = select(Run.id, Run.status, Run.goal, Run.started_at)
    with engine.connect() as conn:
        for row in conn.execute(statement.order_by(Run.id.desc()).limit(limit)):
            print(*row)
@app.command()
def trace(db: str, run: int) -> None:
    pass
app(prog_name="harness-store")
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


def sqlite_utils() -> str | None:
    """The `sqlite-utils` command beside this Python (the `bench` extra), else on PATH."""
    beside = Path(sys.executable).with_name("sqlite-utils")
    return str(beside) if beside.exists() else shutil.which("sqlite-utils")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """A fresh process's wall time and CPU time (user + system), start to exit, run from the
    repository (where `alembic` finds `alembic.ini`); a failure is an error, not a figure."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        raise RuntimeError(f"{argv[:4]} failed ({status})")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def compiled_package() -> None:
    """Byte-compile the package's modules, as installing it does."""
    import harness_store

    compileall.compile_dir(Path(harness_store.__file__).parent, quiet=1)


def run(cfg: Config) -> list[Table]:
    store = small_store(cfg)
    compiled_package()
    plain = dict(os.environ)
    completing = {**plain, **COMPLETE}
    cases = {
        "import typer": ([sys.executable, "-c", "import typer"], plain),
        "Typer app, completion": ([sys.executable, "-c", TYPER_APP], completing),
        "--version": ([*COMMAND, "--version"], plain),
        "completion": (COMMAND, completing),
        "SQLAlchemy + Typer script": ([sys.executable, "-c", SCRIPT, str(store)], plain),
        "Typer app, the SELECT": ([sys.executable, "-c", TYPER_SELECT, "runs", str(store)], plain),
        "Typer app, the models": ([sys.executable, "-c", TYPER_MODELS, "runs", str(store)], plain),
        "runs": ([*COMMAND, "runs", str(store)], plain),
        "alembic current": ([sys.executable, "-m", "alembic", "-x", f"db={store}", "current"],
                            plain),
    }  # fmt: skip
    rows_tool = sqlite_utils()
    if rows_tool is not None:
        cases["sqlite-utils rows"] = ([rows_tool, "rows", str(store), "runs"], plain)
    rounds = cfg.pick(21, 7)
    say(f"startup: {len(cases)} commands x {rounds} rounds, alternated")
    walls: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (argv, env) in cases.items():
            wall, cpu = timed(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    at = {name: median(values) for name, values in walls.items()}
    cpu_at = {name: median(values) for name, values in cpus.items()}
    table = Table(
        "16. start-up: the command beside a small Typer tool (fresh processes, medians)",
        ["command", "wall", "CPU", "floor (wall / CPU)", "÷ floor (wall / CPU)", "target",
         "result"],
    )  # fmt: skip
    for name, floor, target in (
        ("--version", "import typer", 2.0),
        ("completion", "import typer", None),
        ("completion", "Typer app, completion", 1.5),
        ("runs", "SQLAlchemy + Typer script", None),
        ("runs", "Typer app, the SELECT", None),
        ("runs", "Typer app, the models", 1.5),
        ("runs", "alembic current", None),
        *((("runs", "sqlite-utils rows", 1.0),) if rows_tool is not None else ()),
    ):
        ratio, cpu_ratio = at[name] / at[floor], cpu_at[name] / cpu_at[floor]
        verdict = table.check(f"{name} ≤ {target:g}× {floor}", ratio <= target) if target else "—"
        table.add(name, f"{at[name] * 1000:.0f} ms", f"{cpu_at[name] * 1000:.0f} ms",
                  f"{floor}: {at[floor] * 1000:.0f} / {cpu_at[floor] * 1000:.0f} ms",
                  f"{ratio:.2f}× / {cpu_ratio:.2f}×", f"≤ {target:g}×" if target else "—",
                  verdict)  # fmt: skip
    for floor in ("Typer app, the SELECT", "Typer app, the models"):
        ratio = at[floor] / at["SQLAlchemy + Typer script"]
        cpu_ratio = cpu_at[floor] / cpu_at["SQLAlchemy + Typer script"]
        table.notes.append(
            f"{floor} ÷ the SQLAlchemy + Typer script: {ratio:.2f}× wall, {cpu_ratio:.2f}× CPU"
        )
    if rows_tool is None:
        table.notes.append(
            "sqlite-utils is not installed (`pip install -e .[bench]`): its row is left out"
        )
    table.notes.append(
        f"{rounds} rounds; load average {os.getloadavg()[0]:.1f} at the end; the targets are "
        "judged on wall time"
    )
    return [table]
