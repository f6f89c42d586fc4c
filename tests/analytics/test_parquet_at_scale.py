"""`export parquet` at a year's size: its memory does not grow with the store's runs. A store of
50,000 and one of 250,000 runs (written with the raw driver, as io-harness writes, each run with
a step and every tenth in a session turn) are exported by the command; the larger one's peak
resident memory stays within a few MiB of the smaller one's; and an incremental export after
one run is pruned finds that run alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.big_stores import runs_store
from support.clirun import peak_rss_kib, run_in_process

from harness_store import Store
from harness_store.analytics import export_parquet
from harness_store.analytics.dataset import read_manifest

from .heap_peaks import heap_peaks

GROWTH_KIB = 72 * 1024
"""What 200,000 more runs may add to the export's peak. Both stores are past a batch of rows,
so both peaks hold one whole batch; what still grows is the allocators' retention over more
batches and row groups (measured 52–57 MiB in all, quiet machine and CI alike, when written;
0–12 MiB since the marks are streamed: 165–167 → 167–177 MiB, two runs each). A Python object
per run, as before the marks were kept flat, added 75 MiB on top of that, which this bound
still catches; the peaks of Python's heap and pyarrow's pool of the full export grow as those
of the export with nothing new (1.2 MiB and 43 KiB)."""


@pytest.mark.slow
def test_the_exports_memory_does_not_grow_with_the_runs(tmp_path: Path) -> None:
    small = runs_store(tmp_path / "small.sqlite3", 50_000)
    large = runs_store(tmp_path / "large.sqlite3", 250_000)
    peaks = {}
    for name, store in (("small", small), ("large", large)):
        peak_rss_kib("export", "parquet", store, tmp_path / f"{name}-warm")  # caches settled
        peaks[name] = peak_rss_kib("export", "parquet", store, tmp_path / f"{name}-out")
    assert peaks["large"] - peaks["small"] < GROWTH_KIB, peaks


PER_RUN_BYTES = 20
"""What one more run may add to the peaks of an export with nothing new, of Python's heap and
of pyarrow's pool. Its reads are streamed (the runs' marks beside the last export's, the state
tables for their digests), so nothing is held per run: from 50,000 to 250,000 runs Python's
peak grew by 1.2 MiB (a step, not a slope: 12 KiB more at 1,000,000 runs) and the pool's by
43 KiB, each the same to a few KiB from run to run. A Python object held per run is past it
(an int in a list: 36 bytes).

Peak resident memory cannot tell: at these sizes it moves by more than such an object from run
to run of the same export, with what the allocators keep after freeing (two runs each:
165-166 and 175-177 MiB here, 207 and 224 MiB once in CI), where a list of an int a run
adds 7 MiB."""


@pytest.mark.slow
def test_an_export_with_nothing_new_holds_nothing_per_run(tmp_path: Path) -> None:
    peaks = {}
    sizes = {"small": 50_000, "large": 250_000}
    for name, runs in sizes.items():
        store = runs_store(tmp_path / f"{name}.sqlite3", runs)
        out = tmp_path / f"{name}-out"
        assert run_in_process("export", "parquet", store, out).returncode == 0
        peaks[name] = heap_peaks("export", "parquet", store, out)
    bound = PER_RUN_BYTES * (sizes["large"] - sizes["small"]) // 1024
    assert peaks["large"].python - peaks["small"].python < bound, peaks
    assert peaks["large"].arrow - peaks["small"].arrow < bound, peaks


def test_an_incremental_export_finds_the_one_run_that_changed(tmp_path: Path) -> None:
    path = runs_store(tmp_path / "store.sqlite3", 3_000)
    out = tmp_path / "out"
    assert run_in_process("export", "parquet", path, out).returncode == 0
    conn = sqlite3.connect(path, isolation_level=None)
    for table, column in (("steps", "run_id"), ("session_turns", "run_id"), ("runs", "id")):
        conn.execute(f"DELETE FROM {table} WHERE {column} = 2001")  # a prune, as upstream's
    conn.close()
    with Store.open(path, backup=False) as store:
        report = export_parquet(store, out)
    steps = next(t for t in report.tables if t.table == "steps")
    assert (steps.action, steps.rows, steps.removed, steps.total_rows) == ("updated", 0, 1, 2_999)
    marks = read_manifest(out)["run_marks"]
    assert isinstance(marks, str)
    assert sorted(p.name for p in out.glob("_run_marks-*")) == [marks]
