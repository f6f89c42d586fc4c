"""Ctrl-C at the worst moment: while SQLAlchemy's pool is resetting one of the command's
connections (real signals to a real process). The command ends as interrupted — exit 130 and
no traceback — and what it writes is left whole (a sync commits an origin or nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.clirun import default_signals, environ, run_cli, step_store

SIGINT_AT_RESET = """
import os, signal, sys
from sqlalchemy import event
from sqlalchemy.pool import Pool
from harness_store.cli import main

resets, at = 0, int(sys.argv[1])

@event.listens_for(Pool, "reset")
def interrupt_here(dbapi_connection, record, state):
    global resets
    resets += 1
    if resets == at:
        os.kill(os.getpid(), signal.SIGINT)

main(sys.argv[2:])
"""
"""`harness-store ARGS…` with Ctrl-C sent to itself at the pool's `at`-th connection reset:
argv is `at`, then the command's arguments."""


def interrupted(at: int, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SIGINT_AT_RESET, str(at), *map(str, args)],
        capture_output=True,
        text=True,
        env=environ(),
        preexec_fn=default_signals,
        timeout=300,
    )


@pytest.mark.parametrize("at", [1, 2, 3])
def test_ctrl_c_inside_the_pool_ends_a_sync_without_a_traceback(tmp_path: Path, at: int) -> None:
    source = step_store(tmp_path / "a.sqlite3", 200)
    central = tmp_path / "central.sqlite3"
    done = interrupted(at, "sync", source, central)
    assert (done.returncode, done.stderr) == (130, "")
    again = run_cli("sync", source, central, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(run_cli("inspect", central, "--json").stdout)["tables"]["steps"] == 200
