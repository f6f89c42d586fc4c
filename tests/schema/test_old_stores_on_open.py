"""Stores of releases before 0.13 opened by `Store.open`: upgraded in place by default (with a
backup), every row kept and still resumable; refused unchanged with `upgrade=False`."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support import legacy
from support import upstream_sql as up
from support.legacy import new_sqlite
from support.policies import PERMISSIVE_POLICY
from support.upstream_sql import raw

from harness_store import (
    CHECKPOINT_FORMAT,
    McpEvent,
    PolicyEvent,
    RunStatus,
    StepRecord,
    Store,
)
from harness_store.errors import UpgradeRequiredError
from harness_store.releases import HEAD


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_pre_0_4_database_migrates_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.3", "INSERT INTO runs (goal, file) VALUES ('old goal', 'old.txt')")
    with Store.open(path) as db:
        assert db.last_step(1) == 0
        db.record_event(1, PolicyEvent.refusal(1, "read", ".env"))
        assert len(db.events(1)) == 1
    assert up.read_at(str(path), "events", 1) == [
        (1, "refusal", "read", ".env", None, None, None, None, None)
    ]
    assert raw(str(path), "SELECT goal, file FROM runs") == [("old goal", "old.txt")]


def test_a_pre_0_5_database_migrates_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.4", "INSERT INTO runs (goal, file) VALUES ('old', 'old.txt')")
    with Store.open(path) as db:
        assert db.parent(1) is None
        assert db.depth(1) == 0
        child = db.start_child_run("c", "ws", 1, 1)
        assert db.children(1) == [child]
    assert up.read_at(str(path), "children", 1) == [(child,)]


def _write_0_7_rows(path: Path) -> None:
    """What upstream's test writes through a 0.7 Store: a run, a checkpointed step, a refusal."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        legacy.open_as(conn, "0.7", file=True)
        conn.execute(
            "INSERT INTO runs (goal, file, status, started_at) "
            "VALUES ('old goal', 'old.txt', 'running', strftime('%Y-%m-%dT%H:%M:%fZ','now'))"
        )
        conn.execute("BEGIN")
        conn.execute(up.INSERT_STEP, (1, 1, "wrote", "ok", "", "", 0))
        conn.execute(up.INSERT_CHECKPOINT, (1, 1))
        conn.execute("COMMIT")
        conn.execute(
            "INSERT INTO policy_events (run_id, step, kind, act, target) "
            "VALUES (1, 1, 'refusal', 'write', 'secrets/k')"
        )


def test_a_pre_0_8_database_migrates_in_place_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _write_0_7_rows(path)
    with closing(sqlite3.connect(path)) as conn:
        before = legacy.read_answers(conn, "0.7", [1])
        assert "mcp_events" not in legacy.user_tables(conn)

    with Store.open(path) as db:
        assert db.last_step(1) == 1
        assert len(db.events(1)) == 1
        assert db.mcp_events(1) == []
        db.record_mcp(1, McpEvent.connected("files", "stdio"))
        events = db.mcp_events(1)
        assert len(events) == 1
        assert events[0].detail == "stdio"
        assert len(db.steps(1)) == 1
        assert db.run_status(1) is RunStatus.RUNNING

    # and a 0.7 binary's own reads answer exactly as before
    with closing(sqlite3.connect(path)) as conn:
        assert legacy.read_answers(conn, "0.7", [1]) == before


def test_migrates_a_0_1_0_steps_table_in_place(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(
        path,
        "0.1",
        "INSERT INTO runs (goal, file) VALUES ('g', 'f')",
        "INSERT INTO steps (run_id, step, decision, result) VALUES (1, 1, 'wrote file', 'old')",
    )
    with Store.open(path) as db:
        assert db.steps(1) == [StepRecord(1, "wrote file", "old", "", "", 0)]


def test_migrates_a_pre_0_3_runs_table_adding_provider(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.2", "INSERT INTO runs (goal, file) VALUES ('g', 'f')")
    with Store.open(path) as db:
        assert db.provider(1) is None
        db.set_provider(1, "openai")
        assert db.provider(1) == "openai"
    assert up.read_at(str(path), "provider", 1) == [("openai",)]


def test_status_round_trips_and_a_pre_0_7_database_migrates(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    new_sqlite(path, "0.6", "INSERT INTO runs (goal, file) VALUES ('g', 'f')")
    with Store.open(path) as db:
        assert db.status(1) == "running"  # the old row gains the default status
        assert db.elapsed_secs(1) == 0.0  # and has no start stamp
        db.set_status(1, "completed")
        assert db.status(1) == "completed"
        assert db.run_status(1) is RunStatus.COMPLETED
        assert db.status(2) is None
    assert up.read_at(str(path), "status", 1) == [("completed",)]
    assert up.read_at(str(path), "started_at", 1) == [(None,)]


def test_a_0_9_1_store_opens_unchanged_and_still_resumes(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    written = legacy.build_born_at(path, "0.9")
    with closing(sqlite3.connect(path)) as conn:
        before_format = conn.execute("PRAGMA user_version").fetchone()[0]
        before = legacy.read_answers(conn, "0.9", written)
        assert "memory" not in legacy.user_tables(conn)

    with Store.open(path) as db:
        for run in written.run_ids:
            db.check_resumable(run)  # the 0.7 durability promise
        root = written.roots[0]
        assert db.last_step(root) == 3
        assert db.run_status(written.roots[2]) is RunStatus.RUNNING  # the crashed run
        assert db.memory_list("ws") == []
        db.memory_put("ws", "k", "v", 1, 1)
        entry = db.memory_get("ws", "k")
        assert entry is not None and entry.value == "v"

    with closing(sqlite3.connect(path)) as conn:
        after_format = conn.execute("PRAGMA user_version").fetchone()[0]
        assert after_format == before_format == CHECKPOINT_FORMAT, "the format must not move"
        assert legacy.read_answers(conn, "0.9", written) == before


def test_a_pre_0_7_run_finished_here_gets_a_null_duration(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    written = legacy.build_born_at(path, "0.6")
    crashed = written.roots[2]
    with Store.open(path) as db:
        db.checkpoint_step(crashed, StepRecord(99, "resumed", "ok", "", "", 1))
        db.finish_run(crashed, "success")
    (row,) = up.read_at(str(path), "run_summary", crashed)
    assert row[2] == 1 and row[3] == 99 and row[5] is None


@pytest.mark.parametrize("release", ["0.1", "0.6", "0.7", "0.12", "0.13"])
def test_an_old_store_is_upgraded_on_open_with_a_backup(tmp_path: Path, release: str) -> None:
    path = tmp_path / "runs.sqlite3"
    written = legacy.build_born_at(path, release)
    with closing(sqlite3.connect(path)) as conn:
        answers = legacy.read_answers(conn, release, written)
        rows = legacy.dump(conn, typed=True)

    with Store.open(path) as db:
        report: Any = db.upgrade_report
        assert report is not None
        assert report.before == release
        assert report.stamped == release
        assert report.after == HEAD
        backup = Path(report.backup)
        assert backup.parent == path.parent and backup.name.startswith(path.name)
        assert backup.exists()

    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".bak")) == [backup.name]
    with closing(sqlite3.connect(backup)) as conn:
        assert legacy.dump(conn, typed=True) == rows, "the backup is the store as it was"
    with closing(sqlite3.connect(path)) as conn:
        # every read of the old release answers as before, and no row changed
        assert legacy.read_answers(conn, release, written) == answers
        assert legacy.dump(conn, _columns_of(backup), typed=True) == rows
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == CHECKPOINT_FORMAT

    # the new release's tables are there and usable on the old runs
    with Store.open(path) as db:
        assert db.upgrade_report is None, "a second open has nothing to do"
        root, crashed = written.roots[0], written.roots[2]
        db.record_run_policy(root, PERMISSIVE_POLICY)
        assert db.run_policy(root) == PERMISSIVE_POLICY
        db.memory_put("ws", "k", "v", root, 1)
        last = db.last_step(crashed)
        db.checkpoint_step(crashed, StepRecord(last + 1, "resumed", "ok", "", "", 1))
        db.finish_run(crashed, "success")
        summary = db.run_summary(crashed)
        assert summary is not None and summary.steps == last + 1
        assert (summary.duration_ms is None) == (int(release.split(".")[1]) < 7)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".bak")) == [backup.name]


def _columns_of(path: Path) -> dict[str, list[str]]:
    with closing(sqlite3.connect(path)) as conn:
        return legacy.column_names(conn)


@pytest.mark.parametrize("release", ["0.1", "0.6", "0.12"])
def test_an_old_store_opened_without_upgrade_is_refused_and_unchanged(
    tmp_path: Path, release: str
) -> None:
    path = tmp_path / "runs.sqlite3"
    legacy.build_born_at(path, release)
    digest = sha256(path)
    listing = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(UpgradeRequiredError) as info:
        Store.open(path, upgrade=False)
    message = str(info.value)
    assert "harness-store upgrade" in message
    assert str(path) in message
    assert sha256(path) == digest
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        n for n in listing if not n.endswith(("-wal", "-shm"))
    ], "no backup, no new file"
    with closing(sqlite3.connect(path)) as conn:
        assert "alembic_version" not in {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master")
        }
