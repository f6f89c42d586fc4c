"""The Parquet dataset: every table equal to `Store.arrow`, DuckDB's aggregates over it equal
to the Store's own roll-ups, incremental exports that write only what changed, and origins
as a column on a synced store — on both backends."""

from __future__ import annotations

import json
from dataclasses import astuple
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from support.synccheck import synced_pair

from harness_store import StepRecord, Store
from harness_store.analytics import TABLES
from harness_store.analytics.dataset import (
    MANIFEST,
    dataset_files,
    export_parquet,
    read_dataset,
    read_manifest,
)
from harness_store.analytics.lock import LOCK
from harness_store.records import Price, PriceTable
from harness_store.sync import source_run


def all_files(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}


def listed_files(directory: Path) -> set[str]:
    manifest = read_manifest(directory)
    files = {f["path"] for t in manifest["tables"].values() for f in t["files"]}
    return files | {MANIFEST, LOCK, manifest["run_marks"]}


@pytest.mark.slow_on("postgresql")
def test_every_table_of_the_dataset_is_the_stores(written: Store, tmp_path: Path) -> None:
    report = export_parquet(written, tmp_path / "ds")
    assert {t.table for t in report.tables} == set(TABLES)
    for table in TABLES:
        data = read_dataset(tmp_path / "ds", table)
        assert data.equals(written.arrow(table)), table
        for path in dataset_files(tmp_path / "ds", table):  # types kept in the files
            assert pq.read_schema(path) == written.arrow(table).schema
    assert all_files(tmp_path / "ds") == listed_files(tmp_path / "ds")


def prices_for(store: Store) -> PriceTable:
    models = {m for m in store.arrow("provider_calls")["model"].to_pylist() if m}
    table = PriceTable.new("2026-08-01")
    for n, model in enumerate(sorted(models)):
        if n % 3 != 2:  # some models stay unpriced
            price = Price(input=3_000_000 + n, output=15_000_000, cache_read=300_000,
                          cache_write=3_750_000, per_server_tool_request=10_000)  # fmt: skip
            table = table.with_(model, price)
    return table


def duckdb_spend(directory: Path, prices: PriceTable, key: str) -> list[tuple[object, ...]]:
    """Spend grouped by `key` computed by DuckDB from the dataset, with upstream's formula."""
    con = duckdb.connect()
    rows = [(m, p.input, p.output, p.cache_read, p.cache_write, p.per_server_tool_request)
            for m, p in prices.prices.items()]  # fmt: skip
    con.execute(
        "CREATE TABLE prices (model TEXT, input HUGEINT, output HUGEINT, cache_read HUGEINT, "
        "cache_write HUGEINT, per_request HUGEINT)"
    )
    if rows:
        con.executemany("INSERT INTO prices VALUES (?, ?, ?, ?, ?, ?)", rows)
    files = [str(f) for f in dataset_files(directory, "provider_calls")]
    group = {"model": "coalesce(c.model, '(unknown model)')",
             "day": "strftime(c.at, '%Y-%m-%d')"}[key]  # fmt: skip
    u = {n: f"coalesce(c.{n}, 0)::HUGEINT" for n in ("prompt_tokens", "completion_tokens",
         "total_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
         "server_tool_requests")}  # fmt: skip
    reported = "c.total_tokens IS NOT NULL"
    fresh = (
        f"greatest({u['prompt_tokens']} - {u['cache_read_tokens']} - {u['cache_write_tokens']}, 0)"
    )
    cost = (
        f"(({fresh} * p.input + {u['completion_tokens']} * p.output + "
        f"{u['cache_read_tokens']} * p.cache_read + {u['cache_write_tokens']} * p.cache_write "
        f"+ 500000) // 1000000 + {u['server_tool_requests']} * p.per_request)"
    )
    priced = f"({reported} AND p.model IS NOT NULL)"
    sums = ", ".join(f"sum(CASE WHEN {reported} THEN {v} ELSE 0 END)" for v in u.values())
    return con.execute(
        f"SELECT {group} AS k, count(*), {sums}, "
        f"coalesce(sum(CASE WHEN {priced} THEN {cost} END), 0), "
        f"sum(CASE WHEN {priced} THEN 0 ELSE 1 END) "
        f"FROM read_parquet(?) c LEFT JOIN prices p ON p.model = c.model "
        f"GROUP BY k ORDER BY k",
        [files],
    ).fetchall()


@pytest.mark.slow_on("postgresql")
def test_duckdb_reads_the_dataset_and_its_aggregates_equal_the_stores(
    written: Store, tmp_path: Path
) -> None:
    directory = tmp_path / "ds"
    export_parquet(written, directory)
    prices = prices_for(written)
    assert prices.prices, "the store has priced models"
    for key, spend in (("model", written.spend_by_model(prices)),
                       ("day", written.spend_by_day(prices))):  # fmt: skip
        expected = [
            (s.key, s.calls, *(int(v) for v in astuple(s.usage)), s.cost_micros,
             s.unpriced_calls) for s in spend
        ]  # fmt: skip
        got = [tuple(int(v) if not isinstance(v, str) else v for v in row)
               for row in duckdb_spend(directory, prices, key)]  # fmt: skip
        assert got == expected, key
    steps = [str(f) for f in dataset_files(directory, "steps")]
    per_run = duckdb.sql(
        f"SELECT run_id, count(*), sum(tokens) FROM read_parquet({steps!r}) "
        "GROUP BY run_id ORDER BY run_id"
    ).fetchall()
    expected_runs = [
        (r, len(written.steps(r)), written.spent_tokens(r)) for r in sorted(written.runs())
    ]
    assert per_run == [e for e in expected_runs if e[1]]
    # the glob a person would type reads the same rows, typed
    glob = duckdb.sql(
        f"SELECT count(*), typeof(any_value(started_at)) FROM "
        f"read_parquet('{directory}/runs/**/*.parquet')"
    ).fetchall()
    assert glob == [(len(written.runs()), "TIMESTAMP WITH TIME ZONE")]


def add_steps(store: Store, run: int, first: int, count: int) -> None:
    store.checkpoint_steps(
        run,
        [StepRecord.new(i, f"d{i}", "ok").with_trace("p", f"read_file:{{\"n\":{i}}}", i)
         for i in range(first, first + count)],
    )  # fmt: skip


@pytest.mark.slow_on("postgresql")
def test_a_second_export_writes_only_what_changed(store_target: str, tmp_path: Path) -> None:
    directory = tmp_path / "ds"
    with Store.open(store_target) as store:
        runs = [store.start_run(f"goal {n}", "f.rs") for n in range(3)]
        for run in runs:
            add_steps(store, run, 1, 5)
        first = export_parquet(store, directory)
        assert first.rows > 0
        files = {p: p.stat().st_mtime_ns for p in directory.rglob("*.parquet")}

        again = export_parquet(store, directory)
        assert again.rows == 0
        assert {t.action for t in again.tables} == {"unchanged"}
        assert {p: p.stat().st_mtime_ns for p in directory.rglob("*.parquet")} == files

        add_steps(store, runs[0], 6, 4)
        store.finish_run(runs[1], "success")
        third = {t.table: t for t in export_parquet(store, directory).tables}
        assert (third["steps"].action, third["steps"].rows) == ("appended", 4)
        assert third["runs"].action == "rewritten"
        assert third["run_outcomes"].action == "rewritten"
        assert third["policy_events"].action == "unchanged"
        for p, mtime in files.items():  # appended beside the old files, which stay as they are
            if p.exists():
                assert p.stat().st_mtime_ns == mtime
        for table in TABLES:
            assert read_dataset(directory, table).equals(store.arrow(table)), table

        session = store.create_session("/ws")
        store.record_turn(session, None, runs[2], "hi")
        store.delete_session(session)  # deletes the run's steps: they leave the dataset
        fourth = {t.table: t for t in export_parquet(store, directory).tables}
        assert (fourth["steps"].action, fourth["steps"].removed) == ("updated", 5)
        for table in TABLES:
            assert read_dataset(directory, table).equals(store.arrow(table)), table
        assert all_files(directory) == listed_files(directory)


@pytest.mark.slow_on("postgresql")
def test_filters_of_an_export(store_target: str, tmp_path: Path) -> None:
    with Store.open(store_target) as store:
        runs = [store.start_run(f"goal {n}", "f.rs") for n in range(3)]
        for run in runs:
            add_steps(store, run, 1, 3)
        report = export_parquet(store, tmp_path / "ds", tables=["steps", "runs"], runs=runs[:1])
        assert [t.table for t in report.tables] == ["steps", "runs"]
        assert read_dataset(tmp_path / "ds", "steps").equals(store.arrow("steps", runs=runs[:1]))
        # other filters: the dataset is replaced, not mixed
        export_parquet(store, tmp_path / "ds", tables=["steps"])
        assert read_dataset(tmp_path / "ds", "steps").equals(store.arrow("steps"))
        assert set(read_manifest(tmp_path / "ds")["tables"]) == {"steps"}


@pytest.mark.slow_on("postgresql")
def test_a_synced_store_has_origins_and_its_dataset_holds_them_as_a_column(
    store_target: str, tmp_path: Path
) -> None:
    synced_pair(tmp_path, store_target)
    with Store.open(store_target) as store:
        local = store.start_run("written centrally", "x.rs")
        add_steps(store, local, 1, 2)
        assert "origin" in store.arrow("runs").column_names
        steps = store.arrow("steps")
        assert steps.schema.field("origin").type.equals("string")
        for row in steps.to_pylist():
            found = source_run(store_target, row["run_id"])
            assert row["origin"] == (None if found is None else found[0])
        runs = store.arrow("runs", columns=["id", "origin"]).to_pylist()
        assert len({r["origin"] for r in runs if r["origin"]}) == 2
        assert [r["origin"] for r in runs if r["id"] == local] == [None]

        directory = tmp_path / "ds"
        export_parquet(store, directory)
        assert all(p.is_file() for p in (directory / "steps").iterdir())  # no partitions
        for table in TABLES:
            data = read_dataset(directory, table)
            expected = store.arrow(table)
            assert (
                data.sort_by(list(zip(expected.column_names[:1], ["ascending"], strict=True)))
                .select(expected.column_names)
                .equals(expected)
            ), table
        by_origin = duckdb.sql(
            f"SELECT origin, count(*) FROM read_parquet('{directory}/steps/*.parquet') "
            "GROUP BY origin ORDER BY origin"
        ).fetchall()
        counted: dict[str | None, int] = {}
        for row in steps.to_pylist():  # rows written centrally: a null origin
            counted[row["origin"]] = counted.get(row["origin"], 0) + 1
        assert by_origin == sorted(counted.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))


def test_a_directory_holding_something_else_is_refused(written: Store, tmp_path: Path) -> None:
    from harness_store.errors import InvalidValueError

    (tmp_path / MANIFEST).write_text("{}")
    with pytest.raises(InvalidValueError):
        export_parquet(written, tmp_path)
    with pytest.raises(InvalidValueError):
        export_parquet(written, tmp_path / "new", tables=["steps", "nope"])
    assert not (tmp_path / "new" / "steps").exists()


def test_a_store_of_an_older_release_is_refused_naming_the_upgrade(tmp_path: Path) -> None:
    from conftest import copy_fixture

    from harness_store.errors import UpgradeRequiredError

    path = copy_fixture("io-harness-0.22.0/populated", tmp_path)
    with (
        Store.open(path, upgrade=False, read_only=True) as store,
        pytest.raises(UpgradeRequiredError, match="upgrade"),
    ):
        export_parquet(store, tmp_path / "ds")
    assert not (tmp_path / "ds" / "steps").exists()


def test_a_dataset_of_the_older_layout_is_written_again_whole(tmp_path: Path) -> None:
    """A format-1 manifest (a synced store's files in Hive partitions, without `origin`) is
    not trusted: the next export writes every table again and clears the old files."""
    directory = tmp_path / "ds"
    with Store.open(tmp_path / "runs.sqlite3") as store:
        add_steps(store, store.start_run("g", "f.rs"), 1, 2)
        export_parquet(store, directory)
        manifest = read_manifest(directory)
        old = (
            directory / "steps" / "origin=__HIVE_DEFAULT_PARTITION__" / "part-000001-999999.parquet"
        )
        old.parent.mkdir()
        (directory / manifest["tables"]["steps"]["files"][0]["path"]).rename(old)
        manifest["tables"]["steps"]["files"] = [{"path": old.relative_to(directory).as_posix(),
                                                 "rows": 2}]  # fmt: skip
        (directory / MANIFEST).write_text(json.dumps({**manifest, "format": 1}))
        report = export_parquet(store, directory)
        assert {t.action for t in report.tables} == {"rewritten"}
        assert not old.parent.exists()
        assert read_dataset(directory, "steps").equals(store.arrow("steps"))
