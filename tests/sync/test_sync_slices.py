"""Sync into a SQLite centre holds the writers' turn in bounded slices: each write
transaction carries at most a slice's rows (with their id maps and marks), however big the
source, and a sync killed between slices is completed by the next without sending anything
twice or losing anything."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from support.big_stores import runs_store
from support.processes import Worker, run_together
from support.synccheck import add_session, mirror_problems, write_source

from harness_store.sync import sync

SLICE = 100


@contextmanager
def changes_per_commit(dest: Path) -> Iterator[list[int]]:
    """The rows each committed transaction on the SQLite file `dest` changed (SQLite's own
    `total_changes` of the connection, read as each commit begins, so rows written through
    the raw driver count too)."""
    seen: list[int] = []
    last: dict[int, int] = {}

    def on_commit(conn: Any) -> None:
        if conn.engine.url.database is None or Path(conn.engine.url.database) != dest:
            return
        raw = conn.connection.driver_connection
        total = int(raw.total_changes)
        seen.append(total - last.get(id(raw), 0))
        last[id(raw)] = total

    def on_checkout(raw: Any, record: Any, proxy: Any) -> None:
        if isinstance(raw, sqlite3.Connection):
            last[id(raw)] = int(raw.total_changes)

    event.listen(Engine, "commit", on_commit)
    from sqlalchemy.pool import Pool

    event.listen(Pool, "checkout", on_checkout)
    try:
        yield seen
    finally:
        event.remove(Engine, "commit", on_commit)
        event.remove(Pool, "checkout", on_checkout)


def test_each_write_transaction_holds_a_bounded_slice(tmp_path: Path) -> None:
    # two sources, one four times the other: the largest transaction is the same slice for
    # both (a slice's rows, their id maps and marks), not the whole source
    largest = []
    for runs in (300, 1200):
        dest = tmp_path / f"c{runs}.sqlite3"
        sync([], dest)  # the centre is created first: its set-up is no slice
        source = runs_store(tmp_path / f"s{runs}.sqlite3", runs)
        with changes_per_commit(dest) as seen:
            report = sync([source], dest, batch_size=SLICE)
        assert report.origins[0].counts.inserted["runs"] == runs
        assert seen, "no commit was seen"
        largest.append(max(seen))
        assert mirror_problems(str(dest), source) == []
    assert largest[1] <= 3 * SLICE + 20, largest
    assert largest[0] <= 3 * SLICE + 20, largest


KILLED_SYNC = """
import sys, time
from harness_store.sync import sync

def progress(label, done, total, sent):
    if sent >= int(sys.argv[3]):
        print("sent", sent, flush=True)
        time.sleep(600)

sync([sys.argv[1]], sys.argv[2], batch_size=int(sys.argv[4]), progress=progress)
print("done", flush=True)
"""


def _runs(dest: Path) -> int:
    with closing(sqlite3.connect(dest)) as conn:
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])


def test_a_sync_killed_between_slices_keeps_its_slices_and_is_completed(tmp_path: Path) -> None:
    source = runs_store(tmp_path / "host.sqlite3", 2000)
    dest = tmp_path / "centre.sqlite3"
    sync([], dest)
    worker = Worker([sys.executable, "-c", KILLED_SYNC, str(source), str(dest), "1500", "100"])
    worker.wait_line("sent", timeout=120)
    worker.kill()
    assert worker.killed
    kept = _runs(dest)
    assert 0 < kept < 2000, kept  # the slices committed before the kill stayed
    report = sync([source], dest, batch_size=100)
    assert report.origins[0].counts.inserted["runs"] == 2000 - kept  # none sent twice
    assert _runs(dest) == 2000
    assert mirror_problems(str(dest), source) == []
    again = sync([source], dest, batch_size=100)
    assert sum(again.origins[0].counts.inserted.values()) == 0


def test_a_link_to_a_later_slice_survives_a_kill_before_that_slice(tmp_path: Path) -> None:
    # slices of one row: the session's slice commits before its head turn is sent; a kill in
    # the head turn's slice leaves the session's link unset, and the next sync must set it
    source = tmp_path / "host.sqlite3"
    roots = write_source(source, runs=3, steps=1)  # six runs: three roots, a child each
    add_session(source, roots)
    dest = tmp_path / "centre.sqlite3"
    sync([], dest)
    # runs are rows 1-6 sent, the session the 7th: the 8th is its first turn
    worker = Worker([sys.executable, "-c", KILLED_SYNC, str(source), str(dest), "8", "1"])
    worker.wait_line("sent", timeout=120)
    worker.kill()
    assert worker.killed
    with closing(sqlite3.connect(dest)) as conn:
        assert conn.execute("SELECT count(*), max(head_turn_id) FROM sessions").fetchone() == (
            1,
            None,
        )
    sync([source], dest, batch_size=1)
    assert mirror_problems(str(dest), source) == []


RACING_SYNC = """
import sys
from harness_store.sync import sync
print("ready", flush=True)
sys.stdin.readline()
sync([sys.argv[1]], sys.argv[2], batch_size=20)
"""


def test_two_syncs_of_one_origin_at_once_send_nothing_twice(tmp_path: Path) -> None:
    # slices of 20 rows: the two syncs' slices interleave in the writers' queue; a pass that
    # another pass of its origin overtook stops at its next slice instead of sending rows
    # the other sends too
    source = runs_store(tmp_path / "host.sqlite3", 1500)
    dest = tmp_path / "centre.sqlite3"
    sync([], dest)
    argv = [sys.executable, "-c", RACING_SYNC, str(source), str(dest)]
    run_together([argv, argv])
    assert _runs(dest) == 1500
    assert mirror_problems(str(dest), source) == []
