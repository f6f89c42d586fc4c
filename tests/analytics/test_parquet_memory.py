"""What `export parquet` holds while it writes: pyarrow never loads pandas into the command
(where pandas is installed, pyarrow imports it on its first conversion of Python values, only
to ask whether they are pandas objects: a third of the export's peak), and the rows read a few
thousand at a time are still written in row groups of `ROW_GROUP_ROWS`, or fewer where the
rows are wide, so a group holds at most `ROW_GROUP_BYTES` of Arrow data (or one read batch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
from support.clirun import environ

from harness_store import StepRecord, Store
from harness_store.analytics.dataset import read_dataset, read_manifest
from harness_store.analytics.files import READ_ROWS, ROW_GROUP_BYTES, ROW_GROUP_ROWS

PROBE = (
    "import sys\n"
    "from harness_store.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')[:3])\n"
)
"""The command, run as its own process runs it, then the pandas modules it had loaded."""

CALLER = (
    "import sys\n"
    "from harness_store.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "import pandas\n"
    "print(pandas.__name__)\n"
)
"""A program that calls the command from Python, then imports pandas itself."""


def test_the_command_never_loads_pandas(tmp_path: Path) -> None:
    import pandas  # noqa: F401 - installed here, so pyarrow could load it

    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("goal", "f")
        store.checkpoint_steps(run, [StepRecord(n, f"d{n}", f"r{n}") for n in (1, 2)])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "export", "parquet", str(path), str(tmp_path / "out")],
        capture_output=True, text=True, env=environ(), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert read_dataset(tmp_path / "out", "steps").num_rows == 2


def test_a_program_calling_the_command_can_still_import_pandas(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        store.start_run("goal", "f")
    done = subprocess.run(
        [sys.executable, "-c", CALLER, "export", "parquet", str(path), str(tmp_path / "out")],
        capture_output=True, text=True, env=environ(), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "pandas"


def test_rows_read_in_small_batches_are_written_in_whole_row_groups(tmp_path: Path) -> None:
    steps = ROW_GROUP_ROWS + READ_ROWS + 5
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("goal", "f")
        store.checkpoint_steps(run, (StepRecord(n, "d", "r") for n in range(1, steps + 1)))
    out = tmp_path / "out"
    from harness_store.analytics import export_parquet

    with Store.open(path, read_only=True) as store:
        export_parquet(store, out, tables=["steps"])
    (entry,) = read_manifest(out)["tables"]["steps"]["files"]
    meta = pq.ParquetFile(out / entry["path"]).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert groups == [ROW_GROUP_ROWS, READ_ROWS + 5]
    assert read_dataset(out, "steps").column("step").to_pylist() == list(range(1, steps + 1))


def test_wide_rows_are_written_in_row_groups_of_a_bounded_size(tmp_path: Path) -> None:
    width = 2 * ROW_GROUP_BYTES // READ_ROWS  # a read batch of such rows is past the bound
    steps = 2 * READ_ROWS + 5
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("goal", "f")
        store.checkpoint_steps(run, (StepRecord(n, "d", "r" * width) for n in range(1, steps + 1)))
    out = tmp_path / "out"
    from harness_store.analytics import export_parquet

    with Store.open(path, read_only=True) as store:
        export_parquet(store, out, tables=["steps"])
    (entry,) = read_manifest(out)["tables"]["steps"]["files"]
    meta = pq.ParquetFile(out / entry["path"]).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert groups == [READ_ROWS, READ_ROWS, 5]
    assert read_dataset(out, "steps").column("step").to_pylist() == list(range(1, steps + 1))
