"""The command's errors: one line on stderr with the documented exit code, for paths that are
no store, bad usage, passwords, locked stores."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support import legacy
from support.clirun import run_in_process
from support.tiers import sampled

from .commandkit import (
    EXIT_LOCKED,
    EXIT_NOT_A_STORE,
    EXIT_USAGE,
    Copy,
    digest,
    fails,
    sql,
)

# --- errors ------------------------------------------------------------------------------


def make_bad(kind: str, tmp_path: Path) -> Path:
    """A path that is no readable run store, of the given kind."""
    path = tmp_path / f"{kind}.sqlite3"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty-file":
        path.touch()
    elif kind == "text-file":
        path.write_text("not a database\n" * 20)
    elif kind == "foreign":
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
            conn.commit()
    elif kind == "newer-format":
        legacy.build_born_at(path, "0.13")
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 8")
    elif kind == "empty-database":
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 0")
            conn.commit()
    return path


BAD = {
    "missing": "no run store at",
    "directory": "is a directory",
    "empty-file": "empty database (no tables)",
    "text-file": "not a SQLite database",
    "foreign": "not an io-harness run store",
    "newer-format": "checkpoint format 8 is newer",
    "empty-database": "empty database (no tables)",
}


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("command", sampled(["runs", "inspect", "upgrade"], keep=1))
def test_not_a_store_is_one_line_and_exit_3(tmp_path: Path, kind: str, command: str) -> None:
    if kind in ("empty-database", "empty-file") and command in ("inspect", "upgrade"):
        pytest.skip("an empty SQLite database is inspectable, and upgrade creates a store in it")
    if kind == "missing" and command == "upgrade":
        pytest.skip("upgrade creates a store where none is (test_cli_terminal)")
    path = make_bad(kind, tmp_path)
    before = digest(path) if path.is_file() else None
    assert BAD[kind] in fails(EXIT_NOT_A_STORE, command, path)
    if before is not None:
        assert digest(path) == before
    assert path.exists() == (kind != "missing")


def test_usage_errors_are_exit_2(fixture_copy: Copy) -> None:
    path = fixture_copy("io-harness-0.22.0/populated")
    assert "not a usable store path or URL" in fails(EXIT_USAGE, "runs", "nosuchdb://x/y")
    assert "newer than 0.66" in fails(EXIT_USAGE, "upgrade", path, "--to", "0.99")
    assert "unknown revision" in fails(EXIT_USAGE, "upgrade", path, "--to", "latest")
    done = run_in_process("tree", path, "one")
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://someone:s3cr3t-pw@127.0.0.1:1/nowhere",
        "nosuchdb://someone:s3cr3t-pw@host/x",
        "postgresql://someone:s3cr3t-pw@host:notaport/x",
    ],
)
def test_a_password_is_never_printed(url: str) -> None:
    done = run_in_process("runs", url)
    assert done.returncode in (1, EXIT_USAGE) and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "s3cr3t-pw" not in done.stdout + done.stderr


def test_locked_store_is_exit_4(born_05: Path) -> None:
    """A writer holding a rollback-journal store exclusively blocks even a reader."""
    with closing(sqlite3.connect(born_05, isolation_level=None)) as holder:
        holder.execute("BEGIN EXCLUSIVE")
        assert "locked" in fails(EXIT_LOCKED, "inspect", born_05)
        holder.execute("ROLLBACK")


def test_upgrade_of_a_store_held_by_a_writer_is_exit_4(born_013: Path) -> None:
    with closing(sqlite3.connect(born_013, isolation_level=None)) as holder:
        assert holder.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        holder.execute("BEGIN IMMEDIATE")
        line = fails(EXIT_LOCKED, "upgrade", born_013, "--no-backup", said="found: ")
        assert "locked" in line
        holder.execute("ROLLBACK")
    assert sql(born_013, "SELECT name FROM sqlite_master WHERE name = 'alembic_version'") == []
