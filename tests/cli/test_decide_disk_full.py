"""The commands that write a store in place on a full disk (a real tmpfs with no room left):
`approve`, `answer` and `check --repair` say so in one line naming the store and saying that
nothing was done, exit code 1, and the store keeps every row as it was; `memory`, which only
reads, still reads. With io-harness holding the store open (its WAL and shared-memory files
there already) and with nothing else open (the open itself finds no room)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, nullcontext
from pathlib import Path

import pytest
from store.checkkit import lost_lease
from support.small_disk import SmallDisk, fill, small_disks

from harness_store import Store
from harness_store.records import Question

from .commandkit import fails, ok


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


def a_paused_run(path: Path) -> None:
    """A run waiting on an approval and a question, with a memory entry and (a repairable
    finding) a lease of a run that does not exist."""
    with Store.open(path, backup=False) as store:
        run = store.start_run("goal", "plan.toml")
        store.put_pending(run, 1, "write", "/tmp/x", "x")
        store.put_question(run, 1, Question("which?", choices=["a", "b"]))
        store.memory_put("/ws", "key", "value", run, 1)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(lost_lease(9004))


def rows(path: Path) -> list[str]:
    """Every row of the store, as SQL."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return list(conn.iterdump())


WRITES = {
    "approve": (("approve", "{db}", "1"), "nothing was decided"),
    "answer": (("answer", "{db}", "1", "a"), "nothing was answered"),
    "check --repair": (("check", "{db}", "--repair"), "nothing was repaired"),
}


@pytest.mark.parametrize("held_open", [True, False], ids=["held-open", "alone"])
@pytest.mark.parametrize("command", WRITES)
def test_a_write_on_a_full_disk_is_one_line_and_changes_nothing(
    small_disk: SmallDisk, command: str, held_open: bool
) -> None:
    disk = small_disk(2 << 20)
    path = disk / "runs.sqlite3"
    a_paused_run(path)
    before = rows(path)
    args, said = WRITES[command]
    with closing(sqlite3.connect(path)) if held_open else nullcontext() as other:
        if other is not None:
            other.execute("SELECT count(*) FROM runs").fetchall()  # its WAL index is there
        filler = fill(disk, 0)
        line = fails(1, *(a.format(db=path) for a in args))
        assert line.startswith(f"harness-store: error: {path}: the disk is full"), line
        assert said in line and "as it was" in line, line
        assert "key" in ok("memory", path, "/ws")  # a read needs no room
    filler.unlink()
    assert rows(path) == before
