"""`harness-store downgrade STORE --to REV`: the upgrade's report, backup and refusals, the
other way; each direction names the other; errors name shell commands, never Python."""

from __future__ import annotations

import json
from pathlib import Path

from support.clirun import run_in_process
from support.shared import copy_fixture

from harness_store import Store
from harness_store.engine import make_engine, to_url
from harness_store.releases import HEAD
from harness_store.schema import migrate
from harness_store.schema.detect import read_revision


def revision_of(target: str) -> str | None:
    engine = make_engine(to_url(target))
    try:
        with engine.connect() as conn:
            return read_revision(conn)
    finally:
        engine.dispose()


def test_downgrade_reports_backs_up_and_lands(store_target: str) -> None:
    with Store.open(store_target) as store:
        store.start_run("kept", "task.md")
    ran = run_in_process("downgrade", store_target, "--to", "0.22", "--json")
    assert ran.returncode == 0, ran
    report = json.loads(ran.stdout)
    assert (report["before"], report["after"], report["changed"]) == (HEAD, "0.22", True)
    assert revision_of(store_target) == "0.22"
    if "://" not in store_target:
        backup = Path(report["backup"])
        assert backup.exists() and backup.name.startswith(Path(store_target).name)
    else:
        assert report["backup"] is None
    again = run_in_process("downgrade", store_target, "--to", "0.22")
    assert again.returncode == 0 and "nothing to do" in again.stdout, again
    with Store.open(store_target, read_only=True) as store:
        assert store.runs() == [1]


def test_each_direction_names_the_other(store_target: str) -> None:
    migrate.upgrade(store_target, "0.22", backup=False)
    up = run_in_process("downgrade", store_target, "--to", "0.30")
    assert up.returncode == 2, up
    assert "harness-store upgrade" in up.stderr and "--to 0.30`" in up.stderr
    migrate.upgrade(store_target, "0.30", backup=False)
    down = run_in_process("upgrade", store_target, "--to", "0.22")
    assert down.returncode == 2, down
    assert "harness-store downgrade" in down.stderr and "--to 0.22`" in down.stderr
    assert revision_of(store_target) == "0.30"


def test_downgrade_refuses_what_is_not_there(tmp_path: Path) -> None:
    missing = run_in_process("downgrade", tmp_path / "none.sqlite3", "--to", "0.22")
    assert missing.returncode == 3, missing
    assert not (tmp_path / "none.sqlite3").exists()
    unknown = run_in_process("downgrade", tmp_path / "none.sqlite3", "--to", "0.99")
    assert unknown.returncode == 2, unknown


def test_approve_on_an_old_store_names_the_shell_command(tmp_path: Path) -> None:
    db = copy_fixture("io-harness-0.22.0/deferred-approval", tmp_path)
    ran = run_in_process("approve", db, "1")
    assert ran.returncode == 3, ran
    assert "harness-store upgrade" in ran.stderr
    assert "upgrade=True" not in ran.stderr
