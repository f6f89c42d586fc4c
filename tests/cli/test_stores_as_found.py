"""`harness-store` read commands on stores as they are found: no `-wal`/`-shm` left beside a
store that had none, a WAL store on a real read-only mount, and a store left with a hot rollback
journal by a crash (explained, not "attempt to write a readonly database")."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import run_in_process, step_store
from support.sqlite_files import make_hot_journal
from support.tiers import sampled

READS = [
    ["inspect", "{db}"],
    ["runs", "{db}"],
    ["trace", "{db}", "1"],
    ["tree", "{db}", "1"],
    ["memory", "{db}", "ws"],
]


def read_args(command: list[str], db: Path) -> list[str]:
    return [str(db) if a == "{db}" else a for a in command]


@pytest.fixture
def wal_store(tmp_path: Path) -> Path:
    """A closed WAL store: nothing beside it, as the last writer leaves it (no `-wal`/`-shm`,
    and the writers' queue file `-writers` goes with the last writer)."""
    path = step_store(tmp_path / "closed.sqlite3", 50)
    assert side_files(path) == []
    return path


def side_files(path: Path) -> list[str]:
    """What lies beside a store in its directory."""
    return sorted(p.name for p in path.parent.iterdir() if p != path)


@pytest.mark.parametrize("command", sampled(READS, keep=2, ids=[c[0] for c in READS]))
def test_read_commands_leave_no_side_files(wal_store: Path, command: list[str]) -> None:
    done = run_in_process(*read_args(command, wal_store))
    assert done.returncode == 0, done.stderr
    assert side_files(wal_store) == []


def test_inspect_of_a_closed_wal_store_says_wal(wal_store: Path) -> None:
    assert (
        json.loads(run_in_process("inspect", wal_store, "--json").stdout)["journal_mode"] == "wal"
    )


@pytest.fixture(params=["closed", "copied-live"])
def read_only_mount(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A tmpfs holding a WAL store, remounted read-only (a real read-only file system, which
    stops root too): a closed store alone, or one copied while open, its `-wal` and `-shm`
    with it. Skips where mounting is not allowed."""
    mount = tmp_path / "media"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)])
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)")
    try:
        source = step_store(tmp_path / "live.sqlite3", 50)
        if request.param == "closed":
            shutil.copy(source, mount / "backup.sqlite3")
        else:
            conn = sqlite3.connect(source)
            try:
                conn.execute("SELECT count(*) FROM steps").fetchall()
                for suffix in ("", "-wal", "-shm"):
                    shutil.copy(f"{source}{suffix}", f"{mount / 'backup.sqlite3'}{suffix}")
            finally:
                conn.close()
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        assert not os.access(mount, os.W_OK)
        yield mount / "backup.sqlite3"
    finally:
        subprocess.run(["umount", "-l", str(mount)])


@pytest.mark.parametrize("command", sampled(READS, keep=2, ids=[c[0] for c in READS]))
def test_a_wal_store_on_read_only_media_is_readable(
    read_only_mount: Path, command: list[str]
) -> None:
    done = run_in_process(*read_args(command, read_only_mount))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("command", READS, ids=[c[0] for c in READS])
def test_a_hot_journal_is_explained_to_read_commands(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "crashed.sqlite3"
    make_hot_journal(path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    done = run_in_process(*read_args(command, path))
    assert done.returncode == 3, done.stderr
    assert "unfinished transaction" in done.stderr and "harness-store upgrade" in done.stderr
    assert "readonly database" not in done.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
