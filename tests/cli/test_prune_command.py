"""`harness-store prune` from a shell, both backends: `--runs` with its dry run (not a byte
of the file changes), `--older-than`, the archive file, the progress bar, bad input; and a
session dry run with `--archive` reports what the archive would clear."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from support.clirun import on_terminal, run_cli, run_in_process
from support.small_disk import SmallDisk, small_disks
from support.small_disk import fill as fill_disk

from harness_store import Store
from harness_store import models as m
from harness_store.records import StepRecord


def out_json(*args: str | Path) -> Any:
    done = run_in_process(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def fill(target: str, runs: int = 6) -> list[int]:
    ids = []
    with Store.open(target, backup=False) as store:
        for i in range(runs):
            run = store.start_run(f"goal {i}", "plan.toml")
            for step in range(1, 4):
                store.checkpoint_step(run, StepRecord(step, "decide", "result " * 20, tokens=2))
            store.finish_run(run, "success")
            ids.append(run)
        with store._write() as conn:
            conn.execute(
                update(m.Run)
                .where(m.Run.id.in_(ids[:4]))
                .values(started_at="2020-06-01T00:00:00.000Z")
            )
    return ids


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow_on("postgresql")
def test_a_dry_run_says_exactly_what_would_go_and_changes_no_byte(store_target: str) -> None:
    runs = fill(store_target)
    file = Path(store_target)
    digest = sha256(file) if file.exists() else None
    would = out_json("prune", store_target, "--runs", "--before", "2021-01-01", "--dry-run")
    if digest is not None:
        assert sha256(file) == digest
        assert (
            not Path(f"{store_target}-wal").exists()
            or Path(f"{store_target}-wal").stat().st_size == 0
        )
    assert would["dry_run"] is True and would["run_ids"] == runs[:4]
    assert would["tables"] == {"runs": 4, "steps": 12, "checkpoint_events": 12, "run_outcomes": 4}
    assert would["rows"] == 32 and would["bytes"] > 4 * 3 * 140
    done = out_json("prune", store_target, "--runs", "--before", "2021-01-01", "--yes")
    assert {k: v for k, v in done.items() if k != "dry_run"} == {
        k: v for k, v in would.items() if k != "dry_run"
    }
    with Store.open(store_target, backup=False) as store:
        assert sorted(store.runs()) == runs[4:]


@pytest.mark.slow_on("postgresql")
def test_older_than_the_archive_file_and_statuses(tmp_path: Path, store_target: str) -> None:
    runs = fill(store_target)
    archive = tmp_path / "old-runs.sqlite3"
    assert (
        out_json(
            "prune",
            store_target,
            "--runs",
            "--older-than",
            "30d",
            "--status",
            "failed",
            "--dry-run",
        )["runs"]
        == 0
    )
    done = out_json(
        "prune",
        store_target,
        "--runs",
        "--older-than",
        "30d",
        "--keep-last",
        "3",
        "--archive-to",
        archive,
        "--yes",
    )
    assert done["run_ids"] == runs[:3] and done["archive"] == str(archive)
    with Store.open(archive) as kept:
        assert sorted(kept.runs()) == runs[:3]
        assert len(kept.steps(runs[0])) == 3


ASKS = ["--runs", "--before", "2021-01-01"]
"""A prune that asks (no `--yes`): without a terminal it is refused. It reads its stdin, so it
runs in a process of its own with nothing there; the other refusals come before any question."""


@pytest.mark.parametrize(
    "args",
    [
        ["--runs"],
        ["--runs", "--before", "2021-01-01", "--older-than", "30d"],
        ["--runs", "--older-than", "a month"],
        ["--runs", "--before", "yesterday"],
        ["--runs", "--before", "2021-01-01", "--status", "running"],
        ["--runs", "--before", "2021-01-01", "--archive"],
        ["--before", "2021-01-01", "--keep-last", "2"],
        ASKS,  # no terminal, no --yes
    ],
)
@pytest.mark.slow_on("postgresql")
def test_bad_input_is_a_usage_error_and_changes_nothing(store_target: str, args: list[str]) -> None:
    runs = fill(store_target)
    done = (run_cli if args == ASKS else run_in_process)("prune", store_target, *args)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.strip()
    with Store.open(store_target, backup=False) as store:
        assert sorted(store.runs()) == runs


def test_a_long_prune_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    target = str(tmp_path / "runs.sqlite3")
    fill(target, 8)
    code, output = on_terminal("prune", target, "--runs", "--before", "2021-01-01", "--yes")
    assert code == 0, output
    assert "prune" in output and "deleted 4 runs" in output


@pytest.mark.slow_on("postgresql")
def test_a_dry_run_with_archive_reports_what_the_archive_would_clear(store_target: str) -> None:
    with Store.open(store_target, backup=False) as store:
        sessions = []
        for i in range(3):
            session = store.create_session(f"/ws/{i}")
            run = store.start_run("goal " * 30, "plan.toml")
            store.checkpoint_step(run, StepRecord(1, "decide", "result " * 30))
            store.finish_run(run, "success")
            store.finish_turn(
                store.record_turn(session, None, run, "prompt " * 40), "reply", "done"
            )
            sessions.append(session)
        archived = [store.archive_session(s, dry_run=True) for s in sessions]
        deleted = [store.delete_session(s, dry_run=True) for s in sessions]
    would = out_json("prune", store_target, "--before", "9999-01-01", "--dry-run", "--archive")
    assert (would["action"], would["sessions"]) == ("archive", 3)
    assert would["rows"] == sum(a.rows for a in archived) != sum(d.rows for d in deleted)
    assert would["bytes"] == sum(a.bytes for a in archived) != sum(d.bytes for d in deleted)
    done = out_json("prune", store_target, "--before", "9999-01-01", "--archive", "--yes")
    assert (done["rows"], done["bytes"]) == (would["rows"], would["bytes"])


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


def big_runs(target: str, runs: int) -> list[int]:
    """`runs` old finished runs of 3 steps of 40 kB that do not compress."""
    ids = []
    with Store.open(target, backup=False) as store:
        for i in range(runs):
            run = store.start_run(f"goal {i}", "plan.toml")
            for step in range(1, 4):
                result = os.urandom(20_000).hex()
                store.checkpoint_step(run, StepRecord(step, "decide", result, tokens=2))
            store.finish_run(run, "success")
            ids.append(run)
        with store._write() as conn:
            conn.execute(
                update(m.Run).where(m.Run.id.in_(ids)).values(started_at="2020-06-01T00:00:00.000Z")
            )
    return ids


def every_row(target: str) -> dict[int, list[str]]:
    with Store.open(target, backup=False) as store:
        return {run: [s.result for s in store.steps(run)] for run in store.runs()}


@pytest.mark.parametrize(
    ("archive_was", "room"),
    [("absent", 64 << 10), ("absent", 700 << 10), ("there", 64 << 10)],
    ids=["new-archive-no-room-for-its-schema", "new-archive-no-room-for-the-runs", "old-archive"],
)
@pytest.mark.slow_on("postgresql")
def test_an_archive_on_a_full_disk_is_one_line_and_nothing_moves(
    tmp_path: Path, small_disk: SmallDisk, store_target: str, archive_was: str, room: int
) -> None:
    """The archive's disk fills: one line naming the archive, saying nothing was pruned and
    the archive is as it was (a new one removed), exit code 1; every run still in the store."""
    runs = big_runs(store_target, 4)
    disk = small_disk(8 << 20)
    archive = disk / "old-runs.sqlite3"
    if archive_was == "there":
        out_json("prune", store_target, "--runs", "--before", "2020-06-01T00:00:01Z",
                 "--keep-last", "3", "--archive-to", archive, "--yes")  # fmt: skip
        archived = sha256(archive)
    kept = every_row(store_target)
    assert sorted(kept) == (runs[1:] if archive_was == "there" else runs)
    filler = fill_disk(disk, room)
    done = run_in_process(
        "prune", store_target, "--runs", "--before", "2021-01-01", "--archive-to", archive, "--yes"
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"harness-store: error: {archive}: the disk is full"), lines[0]
    assert "nothing was pruned" in lines[0] and "Free some space" in lines[0], lines[0]
    filler.unlink()
    assert every_row(store_target) == kept
    if archive_was == "there":
        assert "the archive is as it was" in lines[0], lines[0]
        assert sha256(archive) == archived
    else:
        assert "the new archive was removed" in lines[0], lines[0]
        assert sorted(p.name for p in disk.iterdir()) == []
    # Room again: the prune finishes the job.
    out_json("prune", store_target, "--runs", "--before", "2021-01-01", "--archive-to", archive,
             "--yes")  # fmt: skip
    assert every_row(store_target) == {}
    with Store.open(archive, backup=False) as kept:
        assert sorted(kept.runs()) == runs


def test_a_store_on_a_full_disk_is_one_line_and_keeps_every_run(small_disk: SmallDisk) -> None:
    """The store's own disk fills while a prune deletes (its journal needs room): one line
    naming the store, every run still there, exit code 1."""
    disk = small_disk(8 << 20)
    target = str(disk / "runs.sqlite3")
    runs = big_runs(target, 4)
    kept = every_row(target)
    filler = fill_disk(disk, 8 << 10)
    done = run_in_process("prune", target, "--runs", "--before", "2021-01-01", "--yes")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        f"harness-store: error: {target}: the disk is full; nothing was pruned: every run is "
        "still in the store. Free some space and run the prune again"
    ]
    filler.unlink()
    assert every_row(target) == kept and sorted(kept) == runs
