"""A source restored from a backup and used again: sync sees its history went back, reads it
again in full and the centre ends an exact mirror of it (no row missing, none doubled)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.synccheck import mirror_problems, row_count, write_source

from harness_store import StepRecord, Store
from harness_store.models import Run, Step
from harness_store.sync import list_origins, sync


def grow(path: Path, tag: str, steps: int) -> None:
    """One more run with `steps` steps, written as io-harness would."""
    with Store.open(path) as store:
        run = store.start_run(f"goal {tag}", f"/src/{tag}.rs")
        store.checkpoint_steps(
            run, [StepRecord.new(i, f"{tag}{i}", "ok") for i in range(1, steps + 1)]
        )


def restore(backup: Path, path: Path, how: str) -> None:
    """Put `backup` back at `path`: over the same inode, or as a new file renamed over it."""
    if how == "in-place":
        before = path.stat().st_ino
        shutil.copyfile(backup, path)  # `cp runs.sqlite3.bak runs.sqlite3`
        assert path.stat().st_ino == before
    else:
        fresh = path.with_name(path.name + ".restoring")
        shutil.copyfile(backup, fresh)
        os.replace(fresh, path)


@pytest.mark.parametrize("marked", [False, True], ids=["unmarked", "marked"])
@pytest.mark.parametrize("how", ["in-place", "by-rename"])
@pytest.mark.slow_on("postgresql")
def test_a_restored_backup_is_read_again_and_mirrored_exactly(
    store_target: str, tmp_path: Path, how: str, marked: bool
) -> None:
    src, other = tmp_path / "agent.sqlite3", tmp_path / "other.sqlite3"
    write_source(src, runs=2, tag="a")
    write_source(other, runs=1, tag="o")
    sync([src, other], store_target, mark=marked)
    backup = tmp_path / "agent.sqlite3.bak"
    shutil.copyfile(src, backup)
    grow(src, "after-backup", 5)
    sync([src], store_target)
    restore(backup, src, how)
    grow(src, "after-restore", 3)  # new ids at or below what was synced

    report = sync([src], store_target)

    (origin,) = report.origins
    assert origin.reread is not None and "steps" in origin.reread
    assert mirror_problems(store_target, src) == []
    assert mirror_problems(store_target, other) == []
    with Store.open(src, read_only=True) as store:
        source_runs = len(store.runs())
    assert row_count(store_target, Run) == source_runs + 2  # other's 1 root + 1 child
    assert len(list_origins(store_target)) == 2
    again = run_in_process("sync", src, store_target)
    assert again.returncode == 0, again.stderr
    assert "nothing new" in again.stdout
    assert mirror_problems(store_target, src) == []


@pytest.mark.slow_on("postgresql")
def test_the_command_says_the_source_was_read_again(store_target: str, tmp_path: Path) -> None:
    src = tmp_path / "agent.sqlite3"
    write_source(src, runs=1)
    backup = tmp_path / "agent.sqlite3.bak"
    shutil.copyfile(src, backup)
    grow(src, "later", 4)
    assert run_in_process("sync", src, store_target).returncode == 0
    restore(backup, src, "in-place")
    grow(src, "restored", 2)
    shown = run_in_process("sync", src, store_target)
    assert shown.returncode == 0, shown.stderr
    assert "read again in full" in shown.stdout and "steps" in shown.stdout
    assert mirror_problems(store_target, src) == []
    assert row_count(store_target, Step) == 5 + 1 + 2
