"""`export parquet` of a store holding one very large value (a 40 MiB step result, as a big tool
output makes): its peak memory stays within a few times the value above the command's own
floor (an export of the same store without it), where statistics of the text columns and the
driver's copy of the row held through the write took ten times the value. The numbers and
times keep their row group statistics, which readers filter by."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.clirun import peak_rss_kib

from harness_store import Store
from harness_store.analytics import export_parquet
from harness_store.analytics.dataset import dataset_files

VALUE = 40 * 2**20
TIMES = 5
"""What the export may hold of the value above its floor: the text the driver returns (1×),
its Arrow column (1×), and the Parquet page it is encoded into and compressed from (2×)."""


def store_with_a_step(path: Path, result: str) -> Path:
    with Store.open(path) as store:
        run = store.start_run("goal", "/w")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
        "VALUES (?, 1, 'd', ?, 'p', '', 5)",
        (run, result),
    )
    conn.close()
    return path


@pytest.mark.slow
def test_one_large_value_costs_a_few_times_itself(tmp_path: Path) -> None:
    small = store_with_a_step(tmp_path / "small.sqlite3", "ok")
    large = store_with_a_step(tmp_path / "large.sqlite3", "x" * VALUE)
    floor = peak_rss_kib("export", "parquet", small, tmp_path / "small-out", "--tables", "steps")
    peak = peak_rss_kib("export", "parquet", large, tmp_path / "large-out", "--tables", "steps")
    assert peak - floor < TIMES * VALUE // 1024, (floor, peak)


def test_text_columns_carry_no_statistics_and_numbers_do(tmp_path: Path) -> None:
    path = store_with_a_step(tmp_path / "store.sqlite3", "a result")
    with Store.open(path) as store:
        export_parquet(store, tmp_path / "out", tables=["steps"])
    (file,) = dataset_files(tmp_path / "out", "steps")
    group = pq.ParquetFile(file).metadata.row_group(0)
    stats = {
        group.column(i).path_in_schema: group.column(i).is_stats_set
        for i in range(group.num_columns)
    }
    assert stats["run_id"] and stats["step"] and stats["tokens"]
    assert not stats["result"] and not stats["prompt"]
