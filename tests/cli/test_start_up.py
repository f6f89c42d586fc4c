"""`harness-store --version` and a shell's completion request (each Tab) answer without loading
the database stack, the models, Rich or the optional exporters: what they import is held here
(their time is measured by `bench/startup.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.shared import copy_fixture

HEAVY = (
    "sqlalchemy",
    "alembic",
    "rich",
    "pyarrow",
    "opentelemetry",
    "psycopg",
    "harness_store.models",
    "harness_store.store",
    "harness_store.schema.detect",
    "harness_store.records.trace",
    "harness_store.transfer",
    "harness_store.schema.migrate",
)
"""Packages a command that reads no store has no use for."""

PROBE = """
import json, sys
from harness_store.cli import main
sys.argv = ["harness-store", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def loaded(args: list[str], env: dict[str, str]) -> tuple[str, list[str]]:
    """What the command printed, and the heavy modules it had loaded by its end."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )
    modules = json.loads(done.stderr.rpartition("MODULES ")[2])
    return done.stdout, [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_the_version_loads_no_database_stack() -> None:
    out, heavy = loaded(["--version"], {})
    assert out.startswith("harness-store ")
    assert heavy == []


@pytest.mark.parametrize(
    ("words", "expected"), [("harness-store ru", "runs"), ("harness-store tr", "trace")]
)
def test_a_completion_request_loads_no_database_stack(words: str, expected: str) -> None:
    env = {
        "_HARNESS_STORE_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": "1",
    }
    out, heavy = loaded([], env)
    assert expected in out.split()
    assert heavy == []


def test_the_package_loads_no_record_module_until_one_is_used() -> None:
    code = (
        "import sys, harness_store\n"
        "assert not any(m.startswith('harness_store.records.') for m in sys.modules)\n"
        "from harness_store import StepRecord, ToolCall\n"
        "import harness_store.records as r\n"
        "assert all(getattr(r, n).__module__.startswith('harness_store.records.') "
        "for n in r.__all__ if isinstance(getattr(r, n), type))\n"
        "assert sorted(harness_store.RECORDS) == sorted(r.__all__)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def written_store(tmp_path: Path) -> tuple[Path, str]:
    """A store written by the Store, and a goal of one of its runs."""
    from harness_store import Store

    path = tmp_path / "store.sqlite3"
    with Store.open(str(path)) as store:
        store.start_run("goal", "src/a.rs")
    return path, "goal"


def upgraded_fixture(tmp_path: Path) -> tuple[Path, str]:
    """The real 0.29 store io-harness left, brought to head by `harness-store upgrade`."""
    from support.clirun import run_in_process

    path = copy_fixture("io-harness-0.29.0/aggregates", tmp_path)
    assert run_in_process("upgrade", str(path), "--no-backup").returncode == 0
    return path, "verified on the first attempt"


@pytest.mark.parametrize("make", [written_store, upgraded_fixture])
def test_listing_a_store_at_head_loads_no_migration_machinery(
    tmp_path: Path, make: Callable[[Path], tuple[Path, str]]
) -> None:
    """`runs` on a store at head (one the Store wrote; the real 0.29 store, upgraded) opens it
    through the Store (models, detection), but Alembic, the drivers of the other backend and
    the optional exporters stay unloaded: an upgrade is what needs the chain."""
    path, goal = make(tmp_path)
    out, heavy = loaded(["runs", str(path)], {})
    assert goal in out
    unused = ("alembic", "psycopg", "pyarrow", "opentelemetry", "harness_store.transfer",
              "harness_store.schema.migrate")  # fmt: skip
    assert [m for m in heavy if m.split(".")[0] in unused or m.startswith(unused)] == []


EXITING = """
import atexit, gc, os, sys
atexit.register(lambda: os.write(2, b"\\nFROZEN %d" % gc.get_freeze_count()))
from harness_store.cli import main
sys.argv = ["harness-store", *sys.argv[1:]]
try:
    main()
except SystemExit:
    os.write(2, b"\\nRAN %d" % gc.get_freeze_count())
"""


def test_the_command_leaves_its_modules_out_of_the_collections_at_exit(tmp_path: Path) -> None:
    """The process of a command does not hand the garbage collector the objects its imports
    made (the models, the mappers, SQLAlchemy, Typer) to walk again and again: once `runs`
    has imported the Store they are frozen (`gc.freeze`), which the collections skip, and
    again at exit, before the interpreter's last collections (benchmark 16 measures what that
    saves)."""
    path, goal = written_store(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", EXITING, "runs", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert goal in done.stdout
    ran = int(done.stderr.rpartition("RAN ")[2].split()[0])
    assert ran > 10_000
    assert int(done.stderr.rpartition("FROZEN ")[2]) >= ran


def test_the_command_run_from_python_freezes_nothing(tmp_path: Path) -> None:
    """`main(args)` called from Python (a test, a caller's own program) leaves the caller's
    garbage collector as it was, at its exit too: only the command's own process freezes."""
    path, goal = written_store(tmp_path)
    code = (
        "import atexit, gc, os, sys\n"
        "atexit.register(lambda: os.write(2, b'\\nFROZEN %d' % gc.get_freeze_count()))\n"
        "from harness_store.cli import main\n"
        "try:\n"
        "    main(['runs', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    assert gc.isenabled() and gc.get_freeze_count() == 0\n"
        "else:\n"
        "    raise AssertionError('the command did not end')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert goal in done.stdout
    assert done.stderr.rpartition("FROZEN ")[2] == "0"
