"""`copy` and `sync` into a new SQLite store on a full disk (a real tmpfs too small for the
store): one line naming the target, saying that no store was made there and nothing was
copied or synced, in a copy's or sync's words (not an upgrade's backup), and no file left
behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.small_disk import SmallDisk, small_disks
from support.synccheck import write_source

from .commandkit import fails


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
