"""A dataset directory is written by one export at a time, and an export trusts the manifest
only for files that are there: real processes, real readers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
from support.clirun import COMMAND, environ
from support.processes import Worker
from support.synccheck import write_source

from harness_store import Store
from harness_store.analytics import TABLES
from harness_store.analytics.dataset import dataset_files, export_parquet, read_dataset

EXPORTER = Path(__file__).with_name("parquet_exporter.py")


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *map(str, args)], capture_output=True, text=True, env=environ(), timeout=300
    )


def test_a_second_export_into_the_same_directory_is_refused_while_the_first_runs(
    tmp_path: Path,
) -> None:
    store, directory, go = tmp_path / "runs.sqlite3", tmp_path / "ds", tmp_path / "go"
    write_source(store, runs=3, steps=4)
    first = Worker([sys.executable, str(EXPORTER), str(store), str(directory), str(go)])
    try:
        first.wait_line("exporting", timeout=120)
        second = run("export", "parquet", store, directory)
        assert second.returncode == 1, second.stderr
        assert "Traceback" not in second.stderr
        assert "another export is writing" in second.stderr, second.stderr
        assert str(directory) in second.stderr
    finally:
        go.touch()
        first.wait_line("done", timeout=120)
        assert first.finish(timeout=60) == 0, first.stderr
    again = run("export", "parquet", store, directory)  # the lock went with the first export
    assert again.returncode == 0, again.stderr
    assert "0 rows written" in again.stdout
    with Store.open(store, read_only=True) as opened:
        for table in TABLES:
            assert read_dataset(directory, table).equals(opened.arrow(table)), table
            counted = duckdb.sql(
                f"SELECT count(*) FROM read_parquet('{directory / table}/*.parquet')"
            ).fetchall()
            assert counted == [(opened.arrow(table).num_rows,)], table


def test_files_the_manifest_lists_but_are_gone_are_written_again(tmp_path: Path) -> None:
    directory = tmp_path / "ds"
    write_source(tmp_path / "runs.sqlite3", runs=3, steps=4)
    with Store.open(tmp_path / "runs.sqlite3") as store:
        export_parquet(store, directory)
        for table in ("steps", "runs"):  # an append-only table and a state table
            for path in dataset_files(directory, table):
                path.unlink()
        report = {t.table: t for t in export_parquet(store, directory).tables}
        assert report["steps"].action == "rewritten"
        assert report["runs"].action == "rewritten"
        assert report["memory"].action == "unchanged"
        for table in TABLES:
            assert all(p.exists() for p in dataset_files(directory, table)), table
            assert read_dataset(directory, table).equals(store.arrow(table)), table
