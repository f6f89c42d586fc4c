"""The Store's memory writes on a full disk (a real tmpfs with no room left, the store open
before it filled, as io-harness holds it): each raises `DiskFullError` naming the store, and
the store keeps every row as it was (they raised a bare `StoreError` of the driver's words)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support.small_disk import SmallDisk, fill, small_disks

from harness_store import StepRecord, Store
from harness_store.errors import DiskFullError


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


WRITES: dict[str, Callable[[Store, int], Any]] = {
    "memory_put": lambda s, run: s.memory_put("/ws", "new", "value", run, 2),
    "memory_pin": lambda s, run: s.memory_pin("/ws", "key", True),
    "memory_forget": lambda s, run: s.memory_forget("/ws", "key", run, 2),
    "memory_delete": lambda s, run: s.memory_delete("/ws", "key"),
    "memory_clear": lambda s, run: s.memory_clear("/ws"),
}


def rows(path: Path) -> list[str]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return list(conn.iterdump())


@pytest.mark.parametrize("write", WRITES)
def test_a_memory_write_on_a_full_disk_is_a_typed_error_and_changes_nothing(
    small_disk: SmallDisk, write: str
) -> None:
    disk = small_disk(2 << 20)
    path = disk / "runs.sqlite3"
    with Store.open(path, backup=False) as store:
        run = store.start_run("goal", "plan.toml")
        store.memory_put("/ws", "key", "value", run, 1)
    before = rows(path)
    with Store.open(path) as store:
        filler = fill(disk, 0)
        with pytest.raises(DiskFullError, match=rf"^{path}: the disk is full"):
            WRITES[write](store, run)
    filler.unlink()
    assert rows(path) == before
    with Store.open(path) as store:
        assert [e.key for e in store.memory_list("/ws")] == ["key"]


AGAIN: dict[str, Callable[[Store, int], Any]] = {
    "memory_put": lambda s, run: s.memory_put("/ws", "key", "value", run, 1),
    "checkpoint_steps": lambda s, run: s.checkpoint_steps(
        run, [StepRecord(n, "d" * 2048, "r" * 2048) for n in range(1, 50)]
    ),
    "start_run": lambda s, run: s.start_run("g" * 100_000, "plan.toml"),
    "transaction": lambda s, run: _in_a_block(s, run),
}
"""A write through each of the connector's ways: a unit of its own, the driver, a block."""


def _in_a_block(store: Store, run: int) -> None:
    with store.transaction():
        store.memory_put("/ws", "key", "v" * 100_000, run, 1)


@pytest.mark.parametrize("write", AGAIN)
def test_the_store_writes_again_once_the_disk_has_room(small_disk: SmallDisk, write: str) -> None:
    disk = small_disk(2 << 20)
    path = disk / "runs.sqlite3"
    with Store.open(path, backup=False) as store:
        run = store.start_run("goal", "plan.toml")
    with Store.open(path) as store:
        filler = fill(disk, 0)
        with pytest.raises(DiskFullError):
            AGAIN[write](store, run)
        filler.unlink()
        AGAIN[write](store, run)
        store.memory_put("/ws", "after", "value", run, 2)
        assert "after" in [e.key for e in store.memory_list("/ws")]
