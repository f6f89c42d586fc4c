"""`sync --follow` into a SQLite centre whose disk fills: it says so in one event naming the
centre (no traceback), keeps the centre a whole store, and, once there is room, the source
arrives whole without a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.small_disk import SmallDisk, fill, small_disks
from support.synccheck import write_source

from .test_follow import Follower, caught_up


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


def test_a_follower_whose_centre_fills_says_so_and_catches_up_once_there_is_room(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    first, second = tmp_path / "first.sqlite3", tmp_path / "second.sqlite3"
    write_source(first, runs=3, tag="a")
    write_source(second, runs=120, steps=20, tag="b")
    disk = small_disk(4 << 20)
    centre = disk / "centre.sqlite3"
    follower = Follower([first], str(centre))
    caught_up(str(centre), first)
    follower.stop()
    filler = fill(disk, 128 << 10)
    follower = Follower([first, second], str(centre))
    said = follower.wait(lambda e: e["event"] in ("retrying", "refused", "failed"))
    assert said["event"] == "retrying", said
    assert str(centre) in said["message"] and "the disk is full" in said["message"], said
    filler.unlink()
    caught_up(str(centre), second)
    caught_up(str(centre), first)
    assert follower.stop() == 0, follower.worker.stderr
    assert "Traceback" not in follower.worker.stderr
