"""`harness-store check` as a user runs it: a real process on real stores, its exit code,
its text and JSON, and `--repair` with its backup."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from conftest import copy_fixture
from sqlalchemy import create_engine
from support.clirun import COMMAND, environ

from harness_store.cli.check import EXIT_UNHEALTHY


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, "check", *map(str, args)],
        capture_output=True,
        text=True,
        env=environ(),
        timeout=120,
    )


def upgraded_fixture(tmp_path: Path) -> Path:
    path = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    done = subprocess.run(
        [*COMMAND, "upgrade", str(path), "--no-backup"], capture_output=True, env=environ()
    )
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
        conn.exec_driver_sql(
            "INSERT INTO run_leases (run_id, owner, generation, acquired_at, renewed_at, "
            "ttl_secs) VALUES (999, 'pid-1', 1, 'x', 'x', 60)"
        )
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


def test_check_and_repair_on_both_backends(store_target: str) -> None:
    from store.healthkit import plant, populated

    store, _ = populated(store_target)
    with store:
        assert run(store_target).returncode == 0
        plant(
            store,
            "INSERT INTO run_leases (run_id, owner, generation, acquired_at, renewed_at, "
            "ttl_secs) VALUES (9004, 'pid-1', 1, 'x', 'x', 60)",
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
