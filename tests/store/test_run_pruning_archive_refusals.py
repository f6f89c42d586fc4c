"""`prune_runs(archive=…)` and `prune --runs --archive-to` (both backends): an archive is a
separate store holding this store's runs only. The store itself, one of its side files, a
link to either, or a file holding another store's runs is refused (`ArchiveRefusedError`, a
usage error of the command, one line) before anything is deleted; never an overwrite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select
from support.clirun import run_in_process
from support.tiers import sampled

from harness_store import Store, errors
from harness_store.models import Base
from harness_store.records import StepRecord

from .test_run_pruning_archive import rows_by_run

SIDES = ["", "-wal", "-shm", "-journal", "-writers"]


def fill(target: str | Path, runs: int, steps: int = 3, goal: str = "goal") -> list[int]:
    made = []
    with Store.open(target, backup=False) as store, store.transaction():
        for i in range(runs):
            run = store.start_run(f"{goal} {i}", "plan.toml")
            for step in range(1, steps + 1):
                store.checkpoint_step(run, StepRecord(step, "decide", f"{goal} {i}", tokens=1))
            store.finish_run(run, "success")
            made.append(run)
    return made


def count(path: Path, name: str) -> int:
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        n = int(conn.execute(select(func.count()).select_from(Base.metadata.tables[name])).scalar())
    engine.dispose()
    return n


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("link", sampled([False, True], keep=1, ids=["file", "link"]))
def test_the_store_or_a_side_file_of_it_is_never_the_archive(
    tmp_path: Path, side: str, link: bool
) -> None:
    source = tmp_path / "s.sqlite3"
    runs = fill(source, 4)
    named = Path(f"{source}{side}")
    if link:
        os.symlink(named, tmp_path / "link.sqlite3")
        named = tmp_path / "link.sqlite3"
    with Store.open(source, backup=False) as store:
        for dry_run in (True, False):
            with pytest.raises(errors.ArchiveRefusedError):
                store.prune_runs(before="9999-01-01", archive=named, dry_run=dry_run)
        assert sorted(store.runs()) == runs
    done = run_in_process(
        "prune", source, "--runs", "--before", "9999-01-01", "--archive-to", named, "--yes"
    )
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1 and "archive" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    with Store.open(source, backup=False) as store:
        assert sorted(store.runs()) == runs
        assert len(store.steps(runs[0])) == 3


@pytest.mark.slow_on("postgresql")
def test_an_archive_of_another_store_is_never_overwritten(
    tmp_path: Path, store_target: str
) -> None:
    """Store A pruned into the archive, then store B (the test's backend) into the same file:
    B's runs 1–3 are other runs than A's archived 1–3, so B is refused, whole, and A's stay."""
    a = tmp_path / "a.sqlite3"
    archive = tmp_path / "archive.sqlite3"
    fill(a, 3, goal="a")
    with Store.open(a, backup=False) as store:
        assert store.prune_runs(before="9999-01-01", archive=archive).run_ids == [1, 2, 3]
    archived = rows_by_run(archive)
    b_runs = fill(store_target, 3, goal="b")
    assert b_runs == [1, 2, 3]
    with Store.open(store_target, backup=False) as store:
        with pytest.raises(errors.ArchiveRefusedError, match="another store"):
            store.prune_runs(before="9999-01-01", archive=archive)
        assert sorted(store.runs()) == b_runs
    assert rows_by_run(archive) == archived
    done = run_in_process(
        "prune", store_target, "--runs", "--before", "9999-01-01", "--archive-to", archive, "--yes"
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done
    assert "another store" in done.stderr
    assert rows_by_run(archive) == archived


@pytest.mark.slow_on("postgresql")
def test_rows_of_another_store_under_the_same_ids_are_refused_not_raw(
    tmp_path: Path, store_target: str
) -> None:
    """Only the step ids collide (B's runs start after A's, its steps do not): refused, typed,
    before anything of B is deleted; A's archived steps untouched."""
    a = tmp_path / "a.sqlite3"
    archive = tmp_path / "archive.sqlite3"
    fill(a, 3, goal="a")
    with Store.open(a, backup=False) as store:
        store.prune_runs(before="9999-01-01", archive=archive)
    archived = rows_by_run(archive)
    with Store.open(store_target, backup=False) as store:
        for _ in range(3):  # runs 1–3 exist only briefly: B's kept runs are 4–6
            store.finish_run(store.start_run("gone", "plan.toml"), "success")
    with Store.open(store_target, backup=False) as store, store._write() as conn:
        conn.execute(Base.metadata.tables["runs"].delete())
    b_runs = fill(store_target, 3, goal="b")
    assert b_runs == [4, 5, 6]
    with Store.open(store_target, backup=False) as store:
        steps = {run: store.steps(run) for run in b_runs}
        with pytest.raises(errors.ArchiveRefusedError, match="another store"):
            store.prune_runs(before="9999-01-01", archive=archive)
        assert sorted(store.runs()) == b_runs
        assert {run: store.steps(run) for run in b_runs} == steps
    assert rows_by_run(archive) == archived and count(archive, "steps") == 9


@pytest.mark.slow_on("postgresql")
def test_a_prune_into_its_own_archive_again_adds_to_it(tmp_path: Path, store_target: str) -> None:
    archive = tmp_path / "archive.sqlite3"
    first = fill(store_target, 2)
    with Store.open(store_target, backup=False) as store:
        assert store.prune_runs(before="9999-01-01", archive=archive).run_ids == first
    second = fill(store_target, 2)
    with Store.open(store_target, backup=False) as store:
        assert store.prune_runs(before="9999-01-01", archive=archive).run_ids == second
    with Store.open(archive) as opened:
        assert sorted(opened.runs()) == first + second
