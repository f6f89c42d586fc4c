"""`sync` quick-checks a source's pages (`PRAGMA quick_check`, a read of the whole file) where
it must: a new origin, a source read again in full, and otherwise at most every
`PAGE_CHECK_EVERY` seconds an origin (the time of its last check kept in the centre), so a
pass that sends one new run does not read the whole file each time it is run."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.pool import NullPool, Pool
from support.synccheck import mirror_problems, write_source

from harness_store import StepRecord, Store
from harness_store.engine import to_url
from harness_store.sync import SyncRefusedError, sync


@contextmanager
def quick_checks(source: Path) -> Iterator[list[int]]:
    """How many `PRAGMA quick_check`s run on connections to the file `source` meanwhile."""
    counted = [0]
    resolved = str(source.resolve())

    def statement(sql: str) -> None:
        counted[0] += sql.lstrip().upper().startswith("PRAGMA QUICK_CHECK")

    def watch(raw: Any, *_: Any) -> None:
        if not isinstance(raw, sqlite3.Connection):
            return
        if resolved in [str(r[2]) for r in raw.execute("PRAGMA database_list")]:
            raw.set_trace_callback(statement)

    event.listen(Pool, "connect", watch)
    event.listen(Pool, "checkout", watch)
    try:
        yield counted
    finally:
        event.remove(Pool, "connect", watch)
        event.remove(Pool, "checkout", watch)


def add_run(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        run = conn.execute(
            "INSERT INTO runs (goal, file, depth, status, started_at) "
            "VALUES ('one more', 'src/x.rs', 0, 'completed', '2026-01-01T00:00:00.000Z')"
        ).lastrowid
        conn.execute(
            "INSERT INTO steps (run_id, step, decision, result) VALUES (?, 1, 'd', 'ok')", (run,)
        )


def test_a_sync_checks_a_sources_pages_when_new_and_then_at_most_every_so_often(
    tmp_path: Path, store_target: str
) -> None:
    source = tmp_path / "host.sqlite3"
    write_source(source, runs=2)
    with quick_checks(source) as counted:
        sync([source], store_target)  # a new origin: checked
    assert counted == [1]
    add_run(source)
    with quick_checks(source) as counted:
        sync([source], store_target)  # checked a moment ago: not again
    assert counted == [0]
    assert mirror_problems(store_target, source) == []

    from harness_store.sync.origin_state import PAGE_CHECK_EVERY, PAGES_MARK

    engine = create_engine(to_url(store_target), poolclass=NullPool)
    with engine.begin() as conn:  # the last check made longer ago than the period
        conn.execute(
            text("UPDATE hs_sync_marks SET hwm = hwm - :age WHERE tbl = :mark"),
            {"age": int(PAGE_CHECK_EVERY) + 1, "mark": PAGES_MARK},
        )
    engine.dispose()
    add_run(source)
    with quick_checks(source) as counted:
        sync([source], store_target)
    assert counted == [1]
    assert mirror_problems(store_target, source) == []


def test_a_source_damaged_after_its_check_is_refused_by_the_pages_a_pass_reads(
    tmp_path: Path, store_target: str
) -> None:
    """Between checks, what keeps damage out of the centre is SQLite's check of each page a
    read touches: a pass that reads a damaged page refuses the source, nothing of it sent."""
    source = tmp_path / "host.sqlite3"
    with Store.open(source) as store:
        run = store.start_run("goal", "/x")
        store.checkpoint_steps(
            run, [StepRecord.new(i, "d" * 400, "r" * 400) for i in range(1, 300)]
        )
    sync([source], store_target)
    add_run(source)
    size = source.stat().st_size
    with source.open("r+b") as handle:  # every fourth page past the schema's, garbage
        for offset in range(4096 * 3, size - 4096, 4096 * 4):
            handle.seek(offset)
            handle.write(b"\xde\xad\xbe\xef" * 256)
    with quick_checks(source) as counted, pytest.raises(SyncRefusedError) as refused:
        sync([source], store_target)
    assert counted == [0]
    assert "damaged" in str(refused.value.refused)
