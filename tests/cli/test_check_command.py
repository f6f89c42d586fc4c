"""`harness-store check` on real stores: its exit code, its text and JSON, and `--repair` with
its backup (run in this process; a real process where another one holds the store's lock)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import copy_fixture
from sqlalchemy import create_engine
from store.checkkit import lost_lease, populated
from support.clirun import run_cli, run_in_process
from support.processes import Worker
from support.tiers import sampled

from harness_store.cli.check import EXIT_UNHEALTHY
from harness_store.releases import HEAD


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_in_process("check", *args)


def upgraded_fixture(tmp_path: Path) -> Path:
    path = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    done = run_in_process("upgrade", path, "--no-backup")
    assert done.returncode == 0, done.stderr
    return path


def damage(path: Path) -> None:
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
        conn.exec_driver_sql("DROP INDEX run_events_run")
        conn.exec_driver_sql(
            "INSERT INTO steps (run_id, step, decision, result) VALUES (777, 1, 'a', 'b')"
        )
        conn.exec_driver_sql(lost_lease(999))
    engine.dispose()


def test_a_healthy_store_exits_0_and_is_not_changed(tmp_path: Path) -> None:
    path = upgraded_fixture(tmp_path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    done = run(path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("healthy: nothing found")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_damage_is_named_with_what_io_harness_does_and_exit_code_6(tmp_path: Path) -> None:
    path = upgraded_fixture(tmp_path)
    damage(path)
    done = run(path, "--json")
    assert done.returncode == EXIT_UNHEALTHY == 6, done.stderr
    report = json.loads(done.stdout)
    assert not report["healthy"]
    found = sorted((f["kind"], f["table"], f["rows"]) for f in report["findings"])
    assert found == [
        ("lease_of_missing_run", "run_leases", [999]),
        ("missing_index", "run_events", ["run_events_run"]),
        ("orphan", "steps", [777]),
    ]
    assert all(f["io_harness"] for f in report["findings"])
    text = run(path)
    assert text.returncode == 6
    assert "not repaired (it would lose data): DELETE FROM steps" in text.stdout
    assert "--repair: create index run_events_run" in text.stdout
    assert text.stdout.rstrip().endswith("3 problems found (" + ", ".join(report["checks"]) + ")")


def test_repair_backs_up_fixes_the_lossless_and_leaves_the_orphan(tmp_path: Path) -> None:
    path = upgraded_fixture(tmp_path)
    damage(path)
    done = run(path, "--repair", "--json")
    assert done.returncode == 6, done.stderr  # the orphan is left, so still unhealthy
    report = json.loads(done.stdout)
    assert report["repaired"] == [
        "created index run_events_run on run_events",
        "deleted 1 leases of runs that do not exist",
    ]
    backup = Path(report["backup"])
    assert backup.exists() and backup.parent == path.parent
    assert [(f["kind"], f["rows"]) for f in report["findings"]] == [("orphan", [777])]
    # the backup is the store as it was: check names all three in it
    again = json.loads(run(backup, "--json").stdout)
    assert len(again["findings"]) == 3


def test_a_store_that_is_not_there_is_refused_with_exit_3(tmp_path: Path) -> None:
    done = run(tmp_path / "absent.sqlite3")
    assert done.returncode == 3
    assert done.stderr.startswith("harness-store: error: ")
    assert not (tmp_path / "absent.sqlite3").exists()


def test_an_old_release_store_is_checked_as_it_is(tmp_path: Path) -> None:
    path = copy_fixture("io-harness-0.29.0/interrupted", tmp_path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    done = run(path, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["revision"] is None and report["release"] == "0.28"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.slow_on("postgresql")
def test_check_and_repair_on_both_backends(store_target: str) -> None:
    from store.checkkit import plant

    store, _ = populated(store_target)
    with store:
        assert run(store_target).returncode == 0
        plant(
            store,
            lost_lease(9004),
        )
    done = run(store_target, "--json")
    assert done.returncode == 6, done.stderr
    assert [f["kind"] for f in json.loads(done.stdout)["findings"]] == ["lease_of_missing_run"]
    repaired = run(store_target, "--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    report = json.loads(repaired.stdout)
    assert report["repaired"] == ["deleted 1 leases of runs that do not exist"]
    assert report["healthy"] and report["findings"] == []
    assert (report["backup"] is None) == ("://" in store_target)


def overwrite_page(path: Path, table: str, data: bytes) -> None:
    """Write `data` over the root b-tree page of `table` (page 1 for `sqlite_schema`)."""
    conn = sqlite3.connect(path)
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    root = (
        1
        if table == "sqlite_schema"
        else conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[
            0
        ]
    )
    conn.close()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * page + (100 if root == 1 else 0))
        handle.write(data)


GARBAGE = bytes(range(256)) * 4
EMPTY_LEAF = bytes([0x0D, 0, 0, 0, 0, 0x10, 0, 0])
"""A table leaf page with no cells: the table's rows read as none."""


@pytest.mark.parametrize(
    ("table", "data"),
    sampled(
        [
            ("sqlite_schema", GARBAGE),
            ("runs", GARBAGE),
            ("runs", EMPTY_LEAF),
            ("steps", GARBAGE),
            ("hs_steps_run_id_step_id_tokens", GARBAGE),
            ("run_leases", GARBAGE),
        ],
        keep=2,
        several=True,
    ),
)
def test_a_damaged_page_is_a_finding_and_refused_by_the_reads(
    tmp_path: Path, table: str, data: bytes
) -> None:
    """Before: `check` exited 1 with the raw "database disk image is malformed", and `runs`
    printed "no runs" (exit 0) when the runs' page read as empty."""
    path = tmp_path / "runs.sqlite3"
    populated(str(path))[0].close()
    overwrite_page(path, table, data)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    done = run(path, "--json")
    assert done.returncode == EXIT_UNHEALTHY, done.stderr
    report = json.loads(done.stdout)
    assert report["findings"][0]["kind"] == "integrity"
    repaired = run(path, "--repair", "--json")
    assert repaired.returncode == EXIT_UNHEALTHY, repaired.stderr
    assert json.loads(repaired.stdout)["repaired"] == []
    assert json.loads(repaired.stdout)["backup"] is None
    listed = run_in_process("runs", path)
    if listed.returncode != 0:  # a read that does not touch the page may still answer
        assert listed.returncode == 3, listed.stderr
        assert "damaged" in listed.stderr and "Error" not in listed.stderr
    else:
        assert "no runs" not in listed.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_repair_refuses_a_newer_checkpoint_format_as_check_does(tmp_path: Path) -> None:
    """Before: `check` exited 3, `check --repair` said healthy (exit 0)."""
    path = upgraded_fixture(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    checked, repaired = run(path), run(path, "--repair")
    assert checked.returncode == repaired.returncode == 3
    assert checked.stderr == repaired.stderr and "newer" in checked.stderr
    assert not list(tmp_path.glob("*repair*"))


def test_a_repair_that_fails_names_its_backup(tmp_path: Path) -> None:
    """A writer holding the store's lock past the busy timeout stops the repair after its
    backup was taken: the error says the store is as it was and where the backup is."""
    path = upgraded_fixture(tmp_path)
    damage(path)
    holder = Worker.script("lock_holder.py", path, 120)
    try:
        holder.wait_line("locked")
        done = run_cli("check", path, "--repair", timeout=120)
    finally:
        holder.kill()
    assert done.returncode == 4, done.stderr
    (backup,) = tmp_path.glob("*repair*")
    assert f"the backup taken before it is {backup}" in done.stderr
    assert "rolled back" in done.stderr


def test_a_healthy_store_below_the_head_is_said_to_be_so(tmp_path: Path) -> None:
    """An un-upgraded 0.22 store was called "healthy" and nothing more: it still is (exit 0,
    io-harness 0.22 reads it as it is), and the text says it is below this package's head
    and how to bring it up; the JSON names the head beside the store's revision."""
    path = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    done = run(path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("healthy: nothing found")
    assert lines[1] == (
        f"the store is at io-harness 0.22, below {HEAD}, the head this package writes: "
        f"`harness-store upgrade {path}` brings it up"
    )
    report = json.loads(run(path, "--json").stdout)
    assert (report["release"], report["revision"], report["head"]) == ("0.22", None, HEAD)
    (tmp_path / "up").mkdir()
    upgraded = run(upgraded_fixture(tmp_path / "up"))
    assert upgraded.stdout.splitlines()[1:] == [], upgraded.stdout
