"""Ctrl-C at the worst moment: while SQLAlchemy's pool is resetting one of the command's
connections (real signals to a real process). The command ends as interrupted — exit 130 and
no traceback — and what it writes is left whole (a sync commits an origin or nothing)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.clirun import environ, run_cli, step_store
from support.processes import default_signals
from support.shared import copy_fixture

from harness_store.releases import HEAD

SIGINT_AT_RESET = """
import os, signal, sys, traceback
from sqlalchemy import event
from sqlalchemy.pool import Pool
from harness_store.cli import main

resets, at, moment = 0, int(sys.argv[1]), sys.argv[2]

@event.listens_for(Pool, "reset")
def interrupt_here(dbapi_connection, record, state):
    global resets
    resets += 1
    if resets == at:
        calls = [f.name for f in traceback.extract_stack() if "harness_store" in f.filename]
        with open(moment, "w") as out:  # the package's calls the reset came from
            out.write(" ".join(calls))
        os.kill(os.getpid(), signal.SIGINT)

main(sys.argv[3:])
"""
"""`harness-store ARGS…` with Ctrl-C sent to itself at the pool's `at`-th connection reset:
argv is `at`, the file to write the moment into (the names of the package's calls the reset
came from), then the command's arguments."""

MOMENTS = {
    1: ("prepare_dest", ("open", "upgrade")),
    2: ("open", ("upgrade",)),
    3: ("upgrade", ()),
    5: ("sync_source", ("prepare_dest", "upgrade")),
}
"""What each reset of a sync into a new central store is, as (a call it comes from, calls it
does not): 1, the look at the destination giving its connection back before `Store.open`;
2, `Store.open` giving its connections back before its upgrade; 3, the upgrade giving its
connection back once it committed; 5, the source's read-only Store closed once the origin's
rows are committed. A change that moves the resets fails here, rather than leaving the tests
to send their signal at other moments than these."""


def interrupted(at: int, moment: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SIGINT_AT_RESET, str(at), str(moment), *map(str, args)],
        capture_output=True,
        text=True,
        env=environ(),
        preexec_fn=default_signals,
        timeout=300,
    )


@pytest.mark.parametrize("at", sorted(MOMENTS))
def test_ctrl_c_inside_the_pool_ends_a_sync_without_a_traceback(tmp_path: Path, at: int) -> None:
    source = step_store(tmp_path / "a.sqlite3", 200)
    central = tmp_path / "central.sqlite3"
    moment = tmp_path / "moment"
    done = interrupted(at, moment, "sync", source, central)
    assert (done.returncode, done.stderr) == (130, "")
    calls = moment.read_text().split()
    inside, not_inside = MOMENTS[at]
    assert inside in calls and not set(not_inside) & set(calls), calls
    again = run_cli("sync", source, central, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(run_cli("inspect", central, "--json").stdout)["tables"]["steps"] == 200


SIGINT_AT_STATEMENT = """
import os, signal, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
from harness_store.cli import main

marker = sys.argv[1]

@event.listens_for(Engine, "before_cursor_execute")
def interrupt_here(conn, cursor, statement, parameters, context, executemany):
    if marker in statement:
        os.kill(os.getpid(), signal.SIGINT)

main(sys.argv[2:])
"""
"""`harness-store ARGS…` with Ctrl-C sent to itself as the first statement holding argv[1] is
about to run; the command's arguments follow."""


@pytest.mark.parametrize("verb", ["upgrade", "downgrade"])
def test_ctrl_c_in_the_middle_of_an_upgrade_says_the_store_is_unchanged(
    tmp_path: Path, verb: str
) -> None:
    """Ctrl-C while the chain ran exited 130 and said nothing, though the transaction rolled
    back and the store was as before: it says so, in one line, still exit 130, and the
    backup taken for the interrupted attempt is gone."""
    path = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    args: list[str | Path] = [verb, path, *(["--to", "0.13"] if verb == "downgrade" else [])]
    if verb == "downgrade":
        assert run_cli("upgrade", path, "--no-backup").returncode == 0
    before = sha256(path)
    marker = "DROP" if verb == "downgrade" else "CREATE TABLE"
    done = subprocess.run(
        [sys.executable, "-c", SIGINT_AT_STATEMENT, marker, *map(str, args)],
        capture_output=True,
        text=True,
        env=environ(),
        preexec_fn=default_signals,
        timeout=300,
    )
    at = "0.22" if verb == "upgrade" else HEAD
    assert done.returncode == 130, done.stderr
    assert done.stderr == (
        f"harness-store: interrupted: the {verb} was rolled back; {path} is unchanged, "
        f"still at {at}\n"
    )
    assert "Traceback" not in done.stdout
    assert sha256(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
