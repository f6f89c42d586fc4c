"""`prune_runs(archive=…)` and `prune --runs --archive-to` keep every value a SQLite store can
hold byte- and type-exact in the archive (a SQLite store too, which can hold each of them):
text whose bytes are not UTF-8, a NUL in text, a BLOB in a TEXT column, text or a REAL in an
INTEGER column, NaN in a tool call's JSON — written with `sqlite3` directly, as a foreign
writer leaves them, in a run's own row and in its steps."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.clirun import run_in_process

from harness_store import Store
from harness_store.records import StepRecord

FOREIGN = [
    # (table, column, SQL of the value)
    ("runs", "goal", "CAST(X'67FF6F616C' AS TEXT)"),  # not UTF-8
    ("steps", "result", "CAST(X'70FF71' AS TEXT)"),  # not UTF-8
    ("steps", "prompt", "CAST(X'610062' AS TEXT)"),  # a NUL
    ("steps", "decision", "X'00FF10'"),  # a BLOB in TEXT
    ("steps", "tokens", "'many'"),  # text in INTEGER
    ("steps", "tool_call", "'{\"x\": NaN}'"),  # NaN in JSON
    ("checkpoint_events", "detail", "CAST(X'C328' AS TEXT)"),  # not UTF-8
]


def cells(path: Path, runs: list[int]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """`typeof` and `hex` of every foreign cell's column over `runs`' rows, in id order."""
    marks = ",".join(map(str, runs))
    found = {}
    with closing(sqlite3.connect(path)) as conn:
        for table, column, _ in FOREIGN:
            where = f"id IN ({marks})" if table == "runs" else f"run_id IN ({marks})"
            found[(table, column)] = conn.execute(
                f"SELECT typeof({column}), hex({column}) FROM {table} WHERE {where} ORDER BY id"
            ).fetchall()
    return found


def foreign_store(path: Path) -> list[int]:
    """Three finished runs; the foreign values in the first two runs' rows."""
    with Store.open(path, backup=False) as store:
        runs = []
        for i in range(3):
            run = store.start_run(f"goal {i}", "plan.toml")
            store.checkpoint_step(run, StepRecord(1, "decide", f"result {i}", tokens=2))
            store.finish_run(run, "success")
            runs.append(run)
    with closing(sqlite3.connect(path)) as conn:
        for table, column, value in FOREIGN:
            where = "id" if table == "runs" else "run_id"
            conn.execute(f"UPDATE {table} SET {column} = {value} WHERE {where} IN (?, ?)", runs[:2])
        conn.commit()
    return runs


@pytest.mark.parametrize("how", ["store", "command"])
def test_every_foreign_value_arrives_byte_and_type_exact(tmp_path: Path, how: str) -> None:
    source, archive = tmp_path / "runs.sqlite3", tmp_path / "old-runs.sqlite3"
    runs = foreign_store(source)
    before = cells(source, runs)
    assert ("text", "70FF71") in before[("steps", "result")]
    # The first run alone, then the others: the second prune reads the archive's first run
    # (its goal not UTF-8) to see the archive holds this store's runs only.
    for cutoff in (1, 3):
        if how == "store":
            with Store.open(source, backup=False) as store:
                store.prune_runs(before="9999-01-01", keep_last=3 - cutoff, archive=archive)
        else:
            done = run_in_process(
                "prune", source, "--runs", "--before", "9999-01-01", "--keep-last",
                str(3 - cutoff), "--archive-to", archive, "--yes",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
    assert cells(archive, runs) == before
    with closing(sqlite3.connect(source)) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM steps").fetchone() == (0,)


def test_the_same_runs_archived_again_are_replaced_exactly(tmp_path: Path) -> None:
    """A prune stopped after its archive committed, run again: the archive holds these very
    runs (their text not UTF-8) and takes them again, unchanged."""
    source, archive = tmp_path / "runs.sqlite3", tmp_path / "old-runs.sqlite3"
    runs = foreign_store(source)
    before = cells(source, runs)
    copy = tmp_path / "copy.sqlite3"
    with closing(sqlite3.connect(source)) as conn, closing(sqlite3.connect(copy)) as into:
        conn.backup(into)
    with Store.open(copy, backup=False) as store:
        store.prune_runs(before="9999-01-01", archive=archive)
    with Store.open(source, backup=False) as store:
        store.prune_runs(before="9999-01-01", archive=archive)
    assert cells(archive, runs) == before
