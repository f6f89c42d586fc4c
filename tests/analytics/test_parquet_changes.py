"""An incremental export after rows it already wrote changed in the store: a run archived in
place (same rows, text emptied) and runs pruned (deleted) since — on both backends. The
dataset then holds what the Store holds, read back by DuckDB, and only the files holding
those runs' rows are written again."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support.synccheck import synced_pair

from harness_store import StepRecord, Store
from harness_store.analytics import TABLES, changes
from harness_store.analytics.dataset import dataset_files, export_parquet, read_dataset
from harness_store.records import ProviderCall, Usage


def add_steps(store: Store, run: int, first: int, count: int) -> None:
    store.checkpoint_steps(
        run,
        [StepRecord.new(i, f"decided {i}", f"result {i}")
         .with_trace(f"prompt {run}/{i}", f"read_file:{{\"n\":{i}}}", i)
         for i in range(first, first + count)],
    )  # fmt: skip


def exported_session_run(store: Store, directory: Path, goal: str, prompt: str) -> tuple[int, int]:
    """A session with one turn whose run (`goal`) has three steps, exported into `directory`;
    the session and the run."""
    session = store.create_session("/ws")
    run = store.start_run(goal, "f.rs")
    store.record_turn(session, None, run, prompt)
    add_steps(store, run, 1, 3)
    export_parquet(store, directory)
    return session, run


def add_calls(store: Store, run: int, count: int) -> None:
    for i in range(1, count + 1):
        store.record_provider_call(
            run, ProviderCall(i, 1, "anthropic", f"model-{run}", Usage(10 * i, i, 11 * i), 5)
        )


def duckdb_rows(directory: Path, table: str, columns: str) -> list[tuple[object, ...]]:
    files = [str(f) for f in dataset_files(directory, table)]
    relation = duckdb.sql(f"SELECT {columns} FROM read_parquet({files!r}) ORDER BY id")
    assert relation is not None
    return relation.fetchall()


def store_rows(store: Store, table: str, columns: list[str]) -> list[tuple[object, ...]]:
    data = store.arrow(table, columns=columns)
    return list(zip(*(data[c].to_pylist() for c in columns), strict=True))


def assert_dataset_is_the_store(store: Store, directory: Path) -> None:
    for table in TABLES:
        assert read_dataset(directory, table).equals(store.arrow(table)), table
    columns = ["id", "run_id", "prompt", "tool_call", "decision", "result"]
    assert duckdb_rows(directory, "steps", ", ".join(columns)) == store_rows(
        store, "steps", columns
    )
    columns = ["id", "run_id", "model", "prompt_tokens"]
    assert duckdb_rows(directory, "provider_calls", ", ".join(columns)) == store_rows(
        store, "provider_calls", columns
    )


def file_times(directory: Path, table: str) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in dataset_files(directory, table)}


@pytest.mark.slow_on("postgresql")
def test_a_run_archived_in_place_is_exported_again(store_target: str, tmp_path: Path) -> None:
    directory = tmp_path / "ds"
    with Store.open(store_target) as store:
        kept = store.start_run("a run that stays as it is", "f.rs")
        add_steps(store, kept, 1, 6)
        add_calls(store, kept, 2)
        export_parquet(store, directory)
        first_files = file_times(directory, "steps")

        session = store.create_session("/ws")
        archived = store.start_run("a run to archive", "g.rs")
        store.record_turn(session, None, archived, "the turn's prompt")
        add_steps(store, archived, 1, 5)
        add_calls(store, archived, 3)
        export_parquet(store, directory)
        before = store.arrow("steps")

        done = store.archive_session(session)
        assert done.rows > 0
        after = store.arrow("steps")
        assert after.num_rows == before.num_rows  # same rows, their words emptied
        assert after["prompt"].to_pylist() != before["prompt"].to_pylist()

        report = {t.table: t for t in export_parquet(store, directory).tables}
        assert_dataset_is_the_store(store, directory)
        assert report["steps"].action == "updated"
        assert report["steps"].rows == 5  # the archived run's rows, and no others
        assert report["provider_calls"].rows == 0  # archive keeps a call's facts: unchanged
        # the file holding only the run left alone is the same file, untouched
        assert file_times(directory, "steps").items() >= first_files.items()

        again = export_parquet(store, directory)
        assert {t.action for t in again.tables} == {"unchanged"}
        assert_dataset_is_the_store(store, directory)


@pytest.mark.slow_on("postgresql")
def test_runs_pruned_since_the_last_export_leave_the_dataset(
    store_target: str, tmp_path: Path
) -> None:
    directory = tmp_path / "ds"
    with Store.open(store_target) as store:
        runs = [store.start_run(f"goal {n}", "f.rs") for n in range(3)]
        for run in runs:
            add_steps(store, run, 1, 4)
            add_calls(store, run, 2)
        for run in runs[:2]:
            store.finish_run(run, "success")
        export_parquet(store, directory)
        assert set(read_dataset(directory, "steps")["run_id"].to_pylist()) == set(runs)

        pruned = store.prune_runs(before="2999-01-01", keep_last=1)
        assert pruned.run_ids == [runs[0]]
        add_steps(store, runs[2], 5, 2)  # and new rows beside the removal

        report = {t.table: t for t in export_parquet(store, directory).tables}
        assert (report["steps"].action, report["steps"].rows) == ("updated", 2)
        assert report["steps"].removed == 4  # said, not silent
        assert report["provider_calls"].removed == 2
        assert report["runs"].action == "rewritten"
        assert_dataset_is_the_store(store, directory)
        for table in TABLES:
            data = read_dataset(directory, table)
            for column in ("run_id", "parent_run_id"):
                if column in data.column_names:
                    assert runs[0] not in data[column].to_pylist(), table


@pytest.mark.slow_on("postgresql")
def test_a_dataset_is_read_back_in_key_order(store_target: str, tmp_path: Path) -> None:
    directory = tmp_path / "ds"
    with Store.open(store_target) as store:
        session, _ = exported_session_run(store, directory, "first", "prompt")
        second = store.start_run("second", "f.rs")
        add_steps(store, second, 1, 3)
        export_parquet(store, directory)
        store.archive_session(session)  # the first run's rows are written after the second's
        export_parquet(store, directory)
        ids = read_dataset(directory, "steps")["id"]
        assert ids.equals(ids.take(pc.sort_indices(ids)))
        assert read_dataset(directory, "steps").equals(store.arrow("steps"))


@pytest.mark.slow_on("postgresql")
def test_an_archive_of_a_run_whose_goal_was_empty_is_seen(
    store_target: str, tmp_path: Path
) -> None:
    """Nothing of the run's own row changes (its goal was already empty): the session's
    turn still does."""
    directory = tmp_path / "ds"
    with Store.open(store_target) as store:
        session, _ = exported_session_run(store, directory, "", "the prompt")
        store.archive_session(session)
        export_parquet(store, directory)
        assert set(store.arrow("steps")["prompt"].to_pylist()) == {""}
        assert_dataset_is_the_store(store, directory)


@pytest.mark.slow_on("postgresql")
def test_on_a_synced_store_an_archived_run_is_written_again_with_its_origin(
    store_target: str, tmp_path: Path
) -> None:
    synced_pair(tmp_path, store_target)
    directory = tmp_path / "ds"
    with Store.open(store_target) as store:
        export_parquet(store, directory)
        synced = store.arrow("steps", columns=["run_id", "origin"]).to_pylist()
        origin = synced[0]["origin"]
        mates = {r["run_id"] for r in synced if r["origin"] == origin}
        assert len(mates) > 1  # the run shares its file with other runs of its origin
        session = store.create_session("/ws")
        store.record_turn(session, None, synced[0]["run_id"], "asked centrally")
        export_parquet(store, directory)
        store.archive_session(session)
        report = {t.table: t for t in export_parquet(store, directory).tables}
        assert report["steps"].action == "updated"
        for table in TABLES:
            assert read_dataset(directory, table).equals(store.arrow(table)), table
        files = dataset_files(directory, "steps")
        assert {p.parent.name for p in files} == {"steps"}  # no partition directories
        origins = {o for f in files for o in pq.read_table(f, columns=["origin"])["origin"]
                   .to_pylist()}  # fmt: skip
        assert origin in origins


@pytest.mark.slow_on("postgresql")
def test_many_changed_runs_are_compared_a_list_at_a_time(
    store_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More changed runs than one `IN (…)` list takes (made small here): each list's runs
    compared and written, none lost between them."""
    monkeypatch.setattr(changes, "CHUNK", 2)
    directory = tmp_path / "ds"
    with Store.open(store_target) as store:
        session = store.create_session("/ws")
        runs = [store.start_run(f"goal {n}", "f.rs") for n in range(5)]
        for run in runs:
            store.record_turn(session, None, run, f"turn of {run}")
            add_steps(store, run, 1, 3)
        export_parquet(store, directory)
        store.archive_session(session)
        report = {t.table: t for t in export_parquet(store, directory).tables}
        assert (report["steps"].action, report["steps"].rows) == ("updated", 15)
        assert_dataset_is_the_store(store, directory)
