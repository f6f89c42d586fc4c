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

GROWTH_KIB = 72 * 1024
"""What 200,000 more runs may add to the export's peak. Both stores are past a batch of rows,
so both peaks hold one whole batch; what still grows is the allocators' retention over more
batches and row groups (measured 52–57 MiB in all, quiet machine and CI alike) and 16 bytes of
marks a run. A Python object per run, as before the marks were kept flat, added 75 MiB on top
of that, which this bound still catches."""


@pytest.mark.slow
def test_the_exports_memory_does_not_grow_with_the_runs(tmp_path: Path) -> None:
    small = runs_store(tmp_path / "small.sqlite3", 50_000)
    large = runs_store(tmp_path / "large.sqlite3", 250_000)
    peaks = {}
    for name, store in (("small", small), ("large", large)):
        peak_rss_kib("export", "parquet", store, tmp_path / f"{name}-warm")  # caches settled
        peaks[name] = peak_rss_kib("export", "parquet", store, tmp_path / f"{name}-out")
    assert peaks["large"] - peaks["small"] < GROWTH_KIB, peaks


NOTHING_NEW_GROWTH_KIB = 16 * 1024
"""What 200,000 more runs may add to the peak of an export with nothing new: its reads are
streamed (the runs' marks beside the last export's, the `runs` table for its digest), so
only the allocators' retention grows: 5 and 10 MiB measured. At these sizes the marks held
whole, as before, were within that noise (11-13 MiB); at 1,000,000 runs they took 80 MiB more
(263 against 183 MiB, benchmark 17's store). This bound catches a Python object per run."""


@pytest.mark.slow
def test_an_export_with_nothing_new_does_not_grow_with_the_runs(tmp_path: Path) -> None:
    peaks = {}
    for name, runs in (("small", 50_000), ("large", 250_000)):
        store = runs_store(tmp_path / f"{name}.sqlite3", runs)
        out = tmp_path / f"{name}-out"
        assert run_in_process("export", "parquet", store, out).returncode == 0
        peak_rss_kib("export", "parquet", store, out)  # caches settled
        peaks[name] = peak_rss_kib("export", "parquet", store, out)
    assert peaks["large"] - peaks["small"] < NOTHING_NEW_GROWTH_KIB, peaks


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
