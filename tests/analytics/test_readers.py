"""The Parquet dataset read by the readers analysts use — pyarrow's dataset, pandas, polars and
DuckDB — each by the one line the analysis guide shows, on every shape a dataset takes: every
table opens, with the store's rows and the types the same reader gives the store's own Arrow
table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from conftest import FIXTURE_STORES, copy_fixture
from support.synccheck import synced_pair, write_source

from harness_store import StepRecord, Store
from harness_store.analytics import TABLES
from harness_store.analytics.dataset import export_parquet
from harness_store.records import ProviderCall, Usage

# The one-liners of docs/guides/analysis.md, one per reader.


def read_pyarrow(table_dir: Path) -> pa.Table:
    return ds.dataset(table_dir, format="parquet").to_table()


def read_pandas(table_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(table_dir, dtype_backend="pyarrow")


def read_pandas_plain(table_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(table_dir)


def read_polars(table_dir: Path) -> pl.DataFrame:
    return pl.scan_parquet(table_dir).collect()


def read_duckdb(table_dir: Path) -> duckdb.DuckDBPyRelation:
    return duckdb.sql(f"SELECT * FROM read_parquet('{table_dir}/*.parquet')")


def same_pyarrow(read: pa.Table, expected: pa.Table) -> None:
    assert read.schema.remove_metadata().equals(expected.schema), (read.schema, expected.schema)
    key = [(expected.column_names[0], "ascending")]
    assert read.sort_by(key).equals(expected.sort_by(key))


def same_pandas(read: pd.DataFrame, expected: pa.Table) -> None:
    assert len(read) == expected.num_rows
    assert dict(read.dtypes) == dict(expected.to_pandas(types_mapper=pd.ArrowDtype).dtypes)


def same_pandas_plain(read: pd.DataFrame, expected: pa.Table) -> None:
    assert len(read) == expected.num_rows
    assert list(read.columns) == expected.column_names
    assert dict(read.dtypes) == dict(expected.to_pandas().dtypes)


def same_polars(read: pl.DataFrame, expected: pa.Table) -> None:
    frame = pl.from_arrow(expected)
    assert isinstance(frame, pl.DataFrame)
    assert read.height == expected.num_rows
    assert read.schema == frame.schema


def same_duckdb(read: duckdb.DuckDBPyRelation, expected: pa.Table) -> None:
    assert read.aggregate("count(*)").fetchall() == [(expected.num_rows,)]
    own = duckdb.from_arrow(expected)
    assert read.columns == own.columns
    assert read.types == own.types


READERS: dict[str, tuple[Callable[[Path], Any], Callable[[Any, pa.Table], None]]] = {
    "pyarrow": (read_pyarrow, same_pyarrow),
    "pandas": (read_pandas, same_pandas),
    "pandas-plain": (read_pandas_plain, same_pandas_plain),
    "polars": (read_polars, same_polars),
    "duckdb": (read_duckdb, same_duckdb),
}


def add_steps(store: Store, run: int, *numbers: int) -> None:
    store.checkpoint_steps(
        run, [StepRecord.new(i, "d", "ok").with_trace("p", 't:{"a":1}', i) for i in numbers]
    )


def plain(directory: Path) -> Path:
    write_source(directory / "runs.sqlite3", runs=3, steps=4)
    return directory / "runs.sqlite3"


def synced(directory: Path) -> Path:
    target = directory / "central.sqlite3"
    synced_pair(directory, target)
    return target


def synced_with_central_rows(directory: Path) -> Path:
    target = synced(directory)
    with Store.open(target) as store:
        add_steps(store, store.start_run("written centrally", "x.rs"), 1, 2)
    return target


def pruned_empty(directory: Path) -> Path:
    """Exported once with rows, then every run pruned: the next export's tables are empty."""
    path = directory / "runs.sqlite3"
    with Store.open(path) as store:
        for n in range(2):
            run = store.start_run(f"goal {n}", "f.rs")
            add_steps(store, run, 1, 2)
            store.record_provider_call(run, ProviderCall(1, 1, "p", "m", Usage(9, 3, 12), 5))
            store.finish_run(run, "success")
        export_parquet(store, directory / "ds")
        assert store.prune_runs(before="2999-01-01").run_ids
    return path


def incremental(directory: Path) -> Path:
    path = directory / "runs.sqlite3"
    write_source(path, runs=2, steps=3)
    with Store.open(path) as store:
        export_parquet(store, directory / "ds")
        add_steps(store, store.start_run("later", "y.rs"), 1, 2, 3)
    return path


SHAPES: dict[str, Callable[[Path], Path]] = {
    "plain": plain,
    "synced": synced,
    "synced-central": synced_with_central_rows,
    "pruned-empty": pruned_empty,
    "incremental": incremental,
    **{
        fixture: (lambda d, f=fixture: copy_fixture(f, d))  # type: ignore[misc]
        for fixture in FIXTURE_STORES
    },
}


@pytest.fixture(scope="module", params=list(SHAPES))
def exported(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, pa.Table]]:
    """A store of one shape exported (again, for the shapes exported before), and each of its
    tables as `Store.arrow` reads it."""
    directory = tmp_path_factory.mktemp(request.param.replace("/", "-"))
    path = SHAPES[request.param](directory)
    with Store.open(path) as store:  # a real fixture is upgraded here
        export_parquet(store, directory / "ds")
        tables = {name: store.arrow(name) for name in TABLES}
    return directory / "ds", tables


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_opens_every_table_as_the_store_holds_it(
    exported: tuple[Path, dict[str, pa.Table]], reader: str
) -> None:
    directory, tables = exported
    read, same = READERS[reader]
    for name, expected in tables.items():
        try:
            same(read(directory / name), expected)
        except Exception as exc:
            raise AssertionError(f"{reader} on {name}: {exc!r}") from exc


def test_counts_subtract_as_signed_integers_in_every_reader(tmp_path: Path) -> None:
    with Store.open(tmp_path / "runs.sqlite3") as store:
        run = store.start_run("g", "f.rs")
        store.record_provider_call(run, ProviderCall(1, 1, "p", "m", Usage(4500, 300, 4800), 7))
        export_parquet(store, tmp_path / "ds")
        assert store.arrow("provider_calls").schema.field("prompt_tokens").type == pa.int64()
    calls = tmp_path / "ds" / "provider_calls"
    table = read_pyarrow(calls)
    difference = pa.compute.subtract(table["completion_tokens"], table["prompt_tokens"])
    assert difference.to_pylist() == [-4200]
    frame = read_pandas(calls)
    assert (frame["completion_tokens"] - frame["prompt_tokens"]).tolist() == [-4200]
    plain_frame = read_pandas_plain(calls)
    assert (plain_frame["completion_tokens"] - plain_frame["prompt_tokens"]).tolist() == [-4200]
    polars = read_polars(calls).select(pl.col("completion_tokens") - pl.col("prompt_tokens"))
    assert polars.to_series().to_list() == [-4200]
    assert duckdb.sql(
        f"SELECT completion_tokens - prompt_tokens FROM read_parquet('{calls}/*.parquet')"
    ).fetchall() == [(-4200,)]
