"""`compact` on a full disk: the first compact of a store io-harness made is SQLite's VACUUM,
which writes a copy of the store beside it, and when the disk fills it rolls back. The command
says so in one line naming the store, exit code 1, and the store keeps every row (it said
"SQLite error: disk I/O error", naming nothing)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.small_disk import SmallDisk, small_disks
from support.small_disk import fill as fill_disk

from .test_prune_command import big_runs, every_row


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


def test_a_compact_on_a_full_disk_is_one_line_and_keeps_the_store(small_disk: SmallDisk) -> None:
    disk = small_disk(8 << 20)
    target = str(disk / "runs.sqlite3")
    big_runs(target, 4)
    as_io_harness_leaves_it(target)
    kept = every_row(target)
    filler = fill_disk(disk, 64 << 10)
    done = run_in_process("compact", target, "--yes")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 2
    assert done.stderr.splitlines()[-1:] == [  # after "compacting…"
        f"harness-store: error: {target}: the disk is full, so the compact stopped; the store "
        "keeps every row. Free about the store's size and run the compact again"
    ]
    filler.unlink()
    assert every_row(target) == kept


def as_io_harness_leaves_it(target: str) -> None:
    """The file out of incremental auto-vacuum, as upstream creates a store: its compact is
    the one rewrite."""
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("VACUUM")
    finally:
        conn.close()
