"""`copy` and `sync` into a new SQLite store on a full disk (a real tmpfs too small for the
store): one line naming the target, saying that no store was made there and nothing was
copied or synced, in a copy's or sync's words (not an upgrade's backup), and no file left
behind. And `upgrade` of a store already at the head on a full disk names it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.small_disk import SmallDisk, fill, small_disks
from support.synccheck import mirror_problems, write_source

from .commandkit import digest, fails, sql


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


@pytest.mark.parametrize("how", ["copy", "sync"])
def test_a_new_target_on_a_full_disk_is_one_line_and_not_left_behind(
    tmp_path: Path, small_disk: SmallDisk, how: str
) -> None:
    source = tmp_path / "source.sqlite3"
    write_source(source, runs=20, steps=10, tag="h")
    disk = small_disk(64 << 10)  # room for no store's schema
    target = disk / "centre.sqlite3"
    line = fails(1, how, source, target)
    assert line.startswith(f"harness-store: error: {target}: "), line
    assert "the disk is full" in line and "no store was created" in line, line
    assert "backup" not in line and "upgrade" not in line, line
    assert list(disk.iterdir()) == []


def test_upgrade_of_a_store_at_the_head_on_a_full_disk_names_it(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    """Nothing to migrate, but the open still writes (its journal): one line naming the
    store, saying it is unchanged, and the store as it was."""
    original = tmp_path / "original.sqlite3"
    write_source(original, runs=5, tag="h")
    disk = small_disk(original.stat().st_size + (64 << 10))
    path = disk / "runs.sqlite3"
    shutil.copyfile(original, path)
    fill(disk, 0)
    before = digest(path)
    done = run_in_process("upgrade", path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = done.stderr.strip().splitlines()[-1]
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert line.startswith(f"harness-store: error: {path}: "), line
    assert "the disk is full" in line and "unchanged" in line, line
    assert digest(path) == before


def test_a_sync_into_an_existing_centre_on_a_full_disk_is_one_line_and_keeps_it_whole(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    """The centre's disk fills partway through a sync of a second host: one line naming the
    centre, saying what was kept; the centre is a whole store (what was committed before is
    there, nothing half-written), and the sync made again once there is room ends a mirror."""
    first, second = tmp_path / "first.sqlite3", tmp_path / "second.sqlite3"
    write_source(first, runs=3, tag="a")
    write_source(second, runs=120, steps=20, tag="b")
    disk = small_disk(4 << 20)
    centre = disk / "centre.sqlite3"
    assert run_in_process("sync", first, centre).returncode == 0
    filler = fill(disk, 128 << 10)
    line = fails(1, "sync", second, centre)
    assert line.startswith(f"harness-store: error: {centre}: the disk is full"), line
    assert "Free some space" in line, line
    assert sql(centre, "PRAGMA integrity_check") == [("ok",)]
    assert mirror_problems(str(centre), first) == []
    assert run_in_process("check", centre).returncode == 0
    filler.unlink()
    assert run_in_process("sync", second, centre).returncode == 0
    assert mirror_problems(str(centre), first) == [] and mirror_problems(str(centre), second) == []
