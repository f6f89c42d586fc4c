"""Foreign keys on every SQLite connection, as upstream's bundled SQLite has them; stores that
already hold orphan steps (written with foreign keys off) still open, upgrade and copy."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import text
from support.legacy import build_born_at

from harness_store import StepRecord, Store, copy_store
from harness_store.engine import make_engine
from harness_store.errors import RunNotFoundError
from harness_store.releases import HEAD


def orphan_rows(path: Path) -> list[tuple[int, int]]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT run_id, step FROM steps WHERE run_id NOT IN (SELECT id FROM runs) ORDER BY id"
        ).fetchall()
    return [(int(r), int(s)) for r, s in rows]


def add_orphan(path: Path, release_columns: str, values: str) -> None:
    """Write a step for run 999 behind everyone's back, foreign keys off (sqlite3's default)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"INSERT INTO steps ({release_columns}) VALUES ({values})")
        conn.commit()


def test_every_engine_connection_has_foreign_keys_on(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "fk.sqlite3")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
    finally:
        engine.dispose()
    with Store.open(tmp_path / "store.sqlite3") as store, store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1


def test_an_old_store_with_orphan_steps_upgrades_and_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    build_born_at(path, "0.1")
    add_orphan(path, "run_id, step, decision, result", "999, 3, 'd', 'r'")
    with Store.open(path) as store:
        assert store.upgrade_report is not None
        assert store.steps(999)[0].step == 3
        run = store.start_run("new", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
        with pytest.raises(RunNotFoundError):
            store.checkpoint_step(998, StepRecord.new(1, "d", "r"))
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
    assert orphan_rows(path) == [(999, 3)]


def test_a_store_with_orphan_steps_copies_to_sqlite_with_them(tmp_path: Path) -> None:
    source = tmp_path / "source.sqlite3"
    with Store.open(source) as store:
        run = store.start_run("g", "f")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
    add_orphan(source, "run_id, step, decision, result", "999, 7, 'd', 'r'")
    target = tmp_path / "copy.sqlite3"
    copy_store(str(source), str(target))
    assert orphan_rows(target) == [(999, 7)]
    with Store.open(target) as copied:  # and the copy refuses new orphans like any store
        with pytest.raises(RunNotFoundError):
            copied.record(998, StepRecord.new(1, "d", "r"))
        assert [s.step for s in copied.steps(run)] == [1]
