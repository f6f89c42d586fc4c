"""The `harness-store` command against real stores (run in this process; the installed script
as a real process): the command itself, its PostgreSQL stores and `copy`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from support.clirun import run_in_process
from support.provided import unavailable

from harness_store import Store
from harness_store.releases import HEAD

from .commandkit import (
    EXIT_NOT_A_STORE,
    Copy,
    as_json,
    assert_read_only_url_refuses,
    digest,
    fails,
    ok,
)

# --- the command itself ------------------------------------------------------------------


def test_help_names_every_command_and_the_exit_codes() -> None:
    out = ok("--help")
    for command in ("inspect", "upgrade", "runs", "trace", "tree", "memory", "copy"):
        assert command in out
    assert "Exit codes" in out and "4  locked" in out
    assert "harness-store upgrade" in out  # the exit codes say it once, here, not per command


def test_installed_script_runs() -> None:
    script = Path(sys.executable).parent / "harness-store"
    if not script.exists():
        unavailable("the harness-store script is not installed (pip install -e .)")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "inspect" in done.stdout


# --- PostgreSQL --------------------------------------------------------------------------


def test_postgresql_store_read_only_and_password_hidden(pg_url: str) -> None:
    url = make_url(pg_url).set(password="s3cr3t-pw").render_as_string(hide_password=False)
    ok("upgrade", pg_url)
    with Store.open(pg_url) as store:
        root = store.start_run("root goal", "f")
        child = store.start_child_run("child goal", "f", root, 1)
        store.memory_put("ws", "k", "v", root, 1)
        store.finish_run(child, "success")
    done = run_in_process("inspect", url)
    assert "s3cr3t-pw" not in done.stdout + done.stderr
    if done.returncode == 0:
        assert "***" in done.stdout and f"{HEAD} (stamped)" in done.stdout
    doc = as_json("inspect", pg_url)
    assert doc["tables"]["runs"] == 2 and doc["journal_mode"] is None
    assert [r["run_id"] for r in as_json("runs", pg_url)] == [child, root]
    assert as_json("tree", pg_url, str(root))["run_ids"] == [root, child]
    assert [e["key"] for e in as_json("memory", pg_url, "ws")["entries"]] == ["k"]
    assert_read_only_url_refuses(pg_url, "read-only")


# --- copy (needs harness_store.transfer) -------------------------------------------------


def test_copy_sqlite_to_sqlite(fixture_copy: Copy, tmp_path: Path) -> None:
    pytest.importorskip("harness_store.transfer")
    source = fixture_copy("io-harness-0.22.0/interrupted")
    before = digest(source)
    target = tmp_path / "copied.sqlite3"
    done = run_in_process("copy", source, target, "--batch-size", "2", "--skip-unknown-tables")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "runs: 3/3 rows" in done.stderr and "steps: 4/4 rows" in done.stderr
    assert "row counts verified" in done.stdout and "provider_calls" in done.stdout
    assert digest(source) == before
    assert as_json("tree", target, "1")["tokens"] == 400
    report = as_json("copy", source, tmp_path / "again.sqlite3")
    assert report["counts"]["runs"] == 3 and report["counts"]["steps"] == 4
    assert report["counts"]["provider_calls"] == 4 and report["skipped_tables"] == {}
    line = fails(EXIT_NOT_A_STORE, "copy", source, target)
    assert "copied.sqlite3" in line


def test_copy_progress_on_a_terminal(fixture_copy: Copy, tmp_path: Path) -> None:
    pytest.importorskip("harness_store.transfer")
    source = fixture_copy("io-harness-0.22.0/populated")
    done = run_in_process(
        "copy",
        source,
        tmp_path / "copied.sqlite3",
        "--skip-unknown-tables",
        env={"FORCE_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" in done.stderr and "ledger_observations" in done.stderr


def test_copy_sqlite_to_postgresql(fixture_copy: Copy, pg_url: str) -> None:
    pytest.importorskip("harness_store.transfer")
    source = fixture_copy("io-harness-0.22.0/populated")
    report = as_json("copy", source, pg_url, "--skip-unknown-tables")
    assert report["counts"]["steps"] == 4
    assert as_json("trace", pg_url, "1")["tokens"] == 1140
