"""`harness-store export parquet` as a person runs it, on a real store: what it says and
writes run in this process (`run_in_process`); what reaches a terminal, and a missing extra
(an import state of a new process), in a process of its own."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import environ, on_terminal, run_cli, run_in_process
from support.small_disk import SmallDisk, fill, small_disks

from harness_store import StepRecord, Store
from harness_store.analytics.dataset import read_dataset, read_manifest

REPO = Path(__file__).resolve().parents[2]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_in_process(*args)


def small_store(path: Path) -> list[int]:
    with Store.open(path) as store:
        runs = [store.start_run(f"goal {n}", "f.rs") for n in range(2)]
        for run_id in runs:
            store.checkpoint_steps(
                run_id, [StepRecord.new(i, "d", "ok").with_trace("p", "t:{}", i) for i in (1, 2)]
            )
        store.finish_run(runs[0], "success")
    return runs


def test_export_then_nothing_new(tmp_path: Path) -> None:
    store, directory = tmp_path / "runs.sqlite3", tmp_path / "ds"
    runs = small_store(store)
    first = run("export", "parquet", store, directory)
    assert first.returncode == 0, first.stderr
    assert "steps: rewritten, 4 rows" in first.stdout
    assert "\x1b[" not in first.stdout + first.stderr  # piped: no progress bars
    again = run("export", "parquet", store, directory, "--json")
    assert again.returncode == 0, again.stderr
    document = json.loads(again.stdout)
    assert document["rows"] == 0
    assert {t["action"] for t in document["tables"]} == {"unchanged"}
    with Store.open(store, read_only=True) as opened:
        assert read_dataset(directory, "steps").equals(opened.arrow("steps"))
    only = run("export", "parquet", store, tmp_path / "one", "--tables", "steps,runs",
               "--runs", str(runs[0]))  # fmt: skip
    assert only.returncode == 0, only.stderr
    assert set(read_manifest(tmp_path / "one")["tables"]) == {"steps", "runs"}
    assert read_dataset(tmp_path / "one", "steps")["run_id"].to_pylist() == [runs[0]] * 2


def test_bad_input_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    store, directory = tmp_path / "runs.sqlite3", tmp_path / "ds"
    small_store(store)
    for args in (["--tables", "nope"], ["--runs", "x"], ["--since", "last week"]):
        done = run("export", "parquet", store, directory, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith("harness-store: error:")
        assert not (directory / "steps").exists()
    missing = run("export", "parquet", tmp_path / "absent.sqlite3", directory)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


def test_progress_on_a_terminal(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    small_store(store)
    code, screen = on_terminal("export", "parquet", store, tmp_path / "ds")
    assert code == 0
    assert "tables" in screen and "37/37" in screen


def test_the_rows_of_pruned_runs_leaving_the_dataset_are_said(tmp_path: Path) -> None:
    store, directory = tmp_path / "runs.sqlite3", tmp_path / "ds"
    runs = small_store(store)
    assert run("export", "parquet", store, directory).returncode == 0
    pruned = run("prune", store, "--runs", "--before", "2999-01-01", "--yes")
    assert pruned.returncode == 0, pruned.stderr
    again = run("export", "parquet", store, directory)
    assert again.returncode == 0, again.stderr
    assert "steps: updated, 0 rows, 2 rows of pruned runs removed (2 in all)" in again.stdout
    with Store.open(store, read_only=True) as opened:
        assert opened.runs() == runs[1:]
        assert read_dataset(directory, "steps").equals(opened.arrow("steps"))


def test_a_refused_store_creates_nothing(tmp_path: Path) -> None:
    from conftest import copy_fixture

    older = copy_fixture("io-harness-0.22.0/populated", tmp_path)  # needs an upgrade first
    newer = tmp_path / "newer.sqlite3"
    small_store(newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    other = tmp_path / "notes.txt"
    other.write_text("not a store\n")
    for store in (older, newer, other, tmp_path / "absent.sqlite3"):
        directory = tmp_path / f"ds-{store.stem}"
        done = run("export", "parquet", store, directory)
        assert done.returncode == 3, (store, done.stderr)
        assert done.stderr.startswith("harness-store: error:"), done.stderr
        assert not directory.exists(), store


def without(module: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """The command in a child process where `module` cannot be imported (as if its extra were
    not installed)."""
    code = f"import sys; sys.modules[{module!r}] = None; from harness_store.cli import main; "
    code += "main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, env=environ(), timeout=300)  # fmt: skip


@pytest.mark.parametrize(
    ("module", "extra", "command"),
    [("pyarrow", "analytics", ["parquet", "DIR"]),
     ("opentelemetry", "otel", ["otlp", "--endpoint", "http://127.0.0.1:9"])],
)  # fmt: skip
def test_a_missing_extra_exits_1_naming_an_install_that_works_from_a_clone(
    tmp_path: Path, module: str, extra: str, command: list[str]
) -> None:
    store = tmp_path / "runs.sqlite3"
    small_store(store)
    args = [str(tmp_path / "ds") if a == "DIR" else a for a in command]
    done = without(module, "export", command[0], store, *args[1:])
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    hint = f'pip install ".[{extra}]"'
    assert hint in done.stderr, done.stderr
    assert "harness_store[" not in done.stderr
    assert not (tmp_path / "ds").exists()
    # the hint names an extra the clone's pyproject declares, installed from the clone
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert extra in project["optional-dependencies"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disks(tmp_path) as make:
        yield make


def every_file(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*")
            if p.is_file()}  # fmt: skip


@pytest.mark.parametrize("first", ["fresh", "incremental"])
def test_a_full_disk_is_one_line_and_leaves_the_dataset_as_it_was(
    tmp_path: Path, small_disk: SmallDisk, first: str
) -> None:
    """The disk fills while the export writes its files: one line naming the directory and
    saying the dataset is as the last export left it, exit code 1, no traceback (not even the
    "Exception ignored" of a read cut off under it), and not a file of the failed export left.
    In its own process: what the interpreter prints as it exits is the point."""
    store, disk = tmp_path / "runs.sqlite3", small_disk(4 << 20)
    directory = disk / "ds"
    small_store(store)
    if first == "incremental":
        assert run("export", "parquet", store, directory).returncode == 0
    before = every_file(directory) if directory.exists() else {}
    with Store.open(store) as opened:  # text that does not compress: 3 MB of Parquet
        run_id = opened.start_run("big", "f.rs")
        steps = [StepRecord.new(i, "d", os.urandom(50_000).hex()) for i in range(1, 31)]
        opened.checkpoint_steps(run_id, steps)
    filler = fill(disk, 1 << 20)
    done = run_cli("export", "parquet", store, directory)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"harness-store: error: {directory}: the disk is full"), lines[0]
    kept = "as the last export left it" if first == "incremental" else "no file of one was left"
    assert kept in lines[0] and "Free some space" in lines[0], lines[0]
    filler.unlink()
    left = every_file(directory)
    assert left.keys() - {"_export.lock"} == before.keys() - {"_export.lock"}
    assert all(left[name] == content for name, content in before.items())
    if first == "fresh":
        assert [p.name for p in directory.iterdir()] == ["_export.lock"]
    again = run("export", "parquet", store, directory)  # room again: it writes what failed
    assert again.returncode == 0, again.stderr
    with Store.open(store, read_only=True) as opened:
        assert read_dataset(directory, "steps").equals(opened.arrow("steps"))
