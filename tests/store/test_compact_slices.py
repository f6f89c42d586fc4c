"""`compact` on SQLite gives free pages back in slices: each write transaction it holds (where
live writers wait) moves at most a slice of pages, whatever the store's size, and a compact
killed between slices leaves every row and gives back the rest when run again. Work counted
by the database itself: the virtual machine's steps (a progress handler counting every 100)
between the statements that begin a slice (or a `VACUUM`)."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.processes import Worker, worker_argv

from harness_store import StepRecord, Store
from harness_store.store import store_space

STEP_BYTES = 40_000
"""A step's text that does not compress: ten pages of 4 KiB."""


def freed(path: Path, runs: int) -> None:
    """A store born as harness_store makes one, `runs` runs of 3 big steps written and their
    session deleted again, leaving free pages all through the file; 3 runs kept."""
    with Store.open(path, backup=False) as store:
        session = store.create_session("/ws")
        for i in range(runs + 3):
            run = store.start_run(f"goal {i}", "plan.toml")
            for step in range(1, 4):
                store.checkpoint_step(
                    run, StepRecord(step, "decide", os.urandom(STEP_BYTES // 2).hex(), tokens=1)
                )
            store.finish_run(run, "success")
            if i < runs:
                store.record_turn(session, None, run, "prompt")
        store.delete_session(session)


def free_pages(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    finally:
        conn.close()


def every_row(path: Path) -> dict[int, list[str]]:
    with Store.open(path, read_only=True) as store:
        return {run: [s.result for s in store.steps(run)] for run in store.runs()}


@contextmanager
def work_per_slice(store: Store) -> Iterator[list[int]]:
    """The VM steps of each slice (`incremental_vacuum`) or `VACUUM` the store's connection
    runs, each counted from its start to the next one's (or the end)."""
    raw = store._raw
    slices: list[int] = []
    counting = [False]

    def tick() -> int:
        if counting[0]:
            slices[-1] += 1
        return 0

    def traced(sql: str) -> None:
        text = sql.lstrip().upper()
        if text.startswith(("PRAGMA INCREMENTAL_VACUUM", "VACUUM")):
            slices.append(0)
            counting[0] = True

    raw.set_progress_handler(tick, 100)
    raw.set_trace_callback(traced)
    try:
        yield slices
    finally:
        raw.set_progress_handler(None, 100)
        raw.set_trace_callback(None)


def compact_counted(path: Path, runs: int) -> list[int]:
    freed(path, runs)
    kept = every_row(path)
    with Store.open(path, backup=False) as store, work_per_slice(store) as work:
        store.compact()
    assert free_pages(path) == 0 and every_row(path) == kept
    return work


def test_a_compact_slice_costs_the_same_whatever_the_store_size(tmp_path: Path) -> None:
    small = compact_counted(tmp_path / "small.sqlite3", 8)  # ~1 MiB freed: a slice or two
    big = compact_counted(tmp_path / "big.sqlite3", 80)  # ~10 MiB freed: ten times the pages
    # One VACUUM would move every page of the file in one transaction, ten times the work.
    assert len(big) > len(small), (small, big)
    assert max(big) <= 2 * max(small) + 100, (small, big)


def test_a_compact_killed_between_slices_loses_nothing_and_finishes_later(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    freed(path, 30)
    kept, start = every_row(path), free_pages(path)
    worker = Worker(worker_argv("compactor.py", path, 2))
    try:
        worker.wait_line("ready", timeout=60)
        while free_pages(path) > start - 20:  # a few slices given back
            assert worker.proc.poll() is None, "the compact ended before it was killed"
            time.sleep(0.005)
    finally:
        worker.kill()
    assert worker.killed
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    assert 0 < free_pages(path) < start
    assert every_row(path) == kept
    with Store.open(path, backup=False) as store:
        assert store.compact() > 0
    assert free_pages(path) == 0 and every_row(path) == kept


def test_a_store_io_harness_made_is_rewritten_once_then_compacted_in_slices(
    tmp_path: Path,
) -> None:
    """A file not in incremental auto-vacuum (as upstream creates its stores) is switched by
    its first compact, one VACUUM; its next compact is in slices."""
    path = tmp_path / "runs.sqlite3"
    freed(path, 0)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum = NONE")
    conn.execute("VACUUM")  # now as io-harness leaves a store
    assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)
    conn.close()
    with Store.open(path, backup=False) as store:
        freed_again(store)
        with work_per_slice(store) as first:
            assert store.compact() > 0
        freed_again(store)
        with work_per_slice(store) as second:
            assert store.compact() > 0
    assert len(first) == 1  # the one rewrite, which switched the file
    assert len(second) >= 2 and free_pages(path) == 0


def freed_again(store: Store) -> None:
    """A session of 2 MiB of steps written and deleted again."""
    session = store.create_session("/ws2")
    for _ in range(16):
        run = store.start_run("again", "plan.toml")
        for step in range(1, 4):
            store.checkpoint_step(
                run, StepRecord(step, "d", os.urandom(STEP_BYTES // 2).hex(), tokens=1)
            )
        store.finish_run(run, "success")
        store.record_turn(session, None, run, "prompt")
    store.delete_session(session)


@contextmanager
def slices_asked(store: Store, path: Path) -> Iterator[list[tuple[int, int]]]:
    """Each slice the store's connection asks for: (pages it may give back, pages free when
    it began), read as the `incremental_vacuum` statement starts."""
    raw = store._raw
    asked: list[tuple[int, int]] = []

    def traced(sql: str) -> None:
        text = sql.strip().upper()
        if text.startswith("PRAGMA INCREMENTAL_VACUUM("):
            pages = int(text.removeprefix("PRAGMA INCREMENTAL_VACUUM(").split(")")[0])
            asked.append((pages, free_pages(path)))

    raw.set_trace_callback(traced)
    try:
        yield asked
    finally:
        raw.set_trace_callback(None)


def test_a_slice_searches_a_bounded_free_list_however_much_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Giving back a free page at the file's end makes SQLite search the free list for it
    (one entry a free page), so a slice of a fixed number of pages costs more the more is
    free: on a store of a million runs pruned by half, 256 pages took up to 0.4 s, a live
    writer waiting as long. A slice gives back at most `COMPACT_SLICE_WORK` / (pages free)
    pages (at least one), so its search is bounded. The budget is lowered here so a small
    store shows it."""
    monkeypatch.setattr(store_space, "COMPACT_SLICE_WORK", 20_000)
    path = tmp_path / "runs.sqlite3"
    freed(path, 40)
    kept = every_row(path)
    with Store.open(path, backup=False) as store, slices_asked(store, path) as asked:
        assert store.compact() > 0
    assert free_pages(path) == 0 and every_row(path) == kept
    assert max(free for _, free in asked) > 1_000, asked  # a free list worth bounding
    for pages, free in asked:
        assert pages == 1 or pages * free <= 20_000, (pages, free)
    assert max(pages for pages, _ in asked) > 1  # and slices grow as the free list shrinks
