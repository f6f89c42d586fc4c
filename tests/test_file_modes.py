"""Every file a command writes of a store is as private as the store (`file_modes`): the
Parquet dataset (its files, directories, manifest and lock file) and `prune --archive-to`'s
archive, from a 0600 and a 0640 store, under a umask that would make them 0644 and 0755; a
PostgreSQL store's exports start private. (Copy and sync targets and the side files:
tests/sync/test_side_files.py; upgrade backups: tests/schema/test_upgrade_safety.py.)"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.synccheck import write_source

from harness_store import Store
from harness_store.analytics import export_parquet


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def open_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def written_below(root: Path) -> list[Path]:
    return [root, *sorted(root.rglob("*"))]


@pytest.mark.parametrize("store_mode", [0o600, 0o640, 0o440])
def test_a_parquet_dataset_is_as_private_as_its_store(tmp_path: Path, store_mode: int) -> None:
    """The store's bits for group and others; the owner always reads and writes its files."""
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=2)
    os.chmod(source, store_mode)
    dataset = tmp_path / "exports" / "dataset"
    with open_umask(), Store.open(source, read_only=True) as store:
        export_parquet(store, dataset)
        export_parquet(store, dataset, tables=["runs"], since="2000-01-01")  # rewrites
    file_mode = store_mode | 0o600
    directory_mode = file_mode | 0o700 | (0o050 if store_mode & 0o040 else 0)
    seen = written_below(tmp_path / "exports")
    assert any(p.suffix == ".parquet" for p in seen)
    assert any(p.name == "_manifest.json" for p in seen)
    assert any(p.name == "_export.lock" for p in seen)
    wrong = {
        str(p.relative_to(tmp_path)): oct(mode_of(p))
        for p in seen
        if mode_of(p) != (directory_mode if p.is_dir() else file_mode)
    }
    assert wrong == {}


def test_the_command_writes_a_dataset_as_private_as_its_store(tmp_path: Path) -> None:
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=1)
    os.chmod(source, 0o600)
    with open_umask():
        done = run_in_process("export", "parquet", str(source), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert {mode_of(p) for p in written_below(tmp_path / "out") if p.is_file()} == {0o600}
    assert {mode_of(p) for p in written_below(tmp_path / "out") if p.is_dir()} == {0o700}


def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=1)
    os.chmod(source, 0o600)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o775)
    os.chmod(shared, 0o775)
    with open_umask(), Store.open(source) as store:
        export_parquet(store, shared)
    assert mode_of(shared) == 0o775
    assert {mode_of(p) for p in shared.rglob("*") if p.is_file()} == {0o600}


def test_a_postgresql_stores_dataset_starts_private(pg_url: str, tmp_path: Path) -> None:
    with Store.open(pg_url) as store:
        store.start_run("goal", "/w")
        with open_umask():
            export_parquet(store, tmp_path / "out")
    assert {mode_of(p) for p in (tmp_path / "out").rglob("*") if p.is_file()} == {0o600}
    assert {mode_of(p) for p in (tmp_path / "out").rglob("*") if p.is_dir()} == {0o700}


@pytest.mark.parametrize("store_mode", [0o600, 0o640])
def test_an_archive_is_as_private_as_the_store_pruned(tmp_path: Path, store_mode: int) -> None:
    source = tmp_path / "agent.sqlite3"
    with Store.open(source) as store:
        store.finish_run(store.start_run("goal", "/w"), "done")
    os.chmod(source, store_mode)
    archive = tmp_path / "archive.sqlite3"
    with open_umask(), Store.open(source) as store:
        pruned = store.prune_runs(before="9999-01-01", archive=archive)
    assert pruned.runs
    assert mode_of(archive) == store_mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("archive")] == [archive.name]
