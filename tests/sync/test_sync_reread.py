"""A pass that compares an existing origin's big tables whole, streamed a batch at a time
(`whole_compare`): after a prune in the source (the counts no longer agree), while a run is
held back, and when a restored backup is sent again in full. Deletions, changes and inserts
all arrive, nothing is doubled, in a pass written in many slices and batches."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from support.synccheck import mirror_problems, row_count

from harness_store.models import Run
from harness_store.sync import quarantined, sync
from harness_store.sync.finding import SCRUB_ROWS

from .test_sync_changed_rows import add_run, widened

BATCH = 64
"""A batch far smaller than the tables: every big table is merged in many batches."""

RUNS = 3 * SCRUB_ROWS


def write(path: Path, sql: str, *params: Any) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, params)


def prune(path: Path, runs: list[int]) -> None:
    """Delete `runs` with their rows, as a prune does."""
    marks = ",".join("?" * len(runs))
    for table, column in (
        ("run_outcomes", "run_id"),
        ("pending_approvals", "run_id"),
        ("steps", "run_id"),
        ("session_turns", "run_id"),
        ("runs", "id"),
    ):
        write(path, f"DELETE FROM {table} WHERE {column} IN ({marks})", *runs)


def source_runs(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])


def test_a_prune_with_changes_and_inserts_is_mirrored_by_a_streamed_compare(
    tmp_path: Path, store_target: str
) -> None:
    source = widened(tmp_path / "host.sqlite3", RUNS)
    sync([source], store_target, batch_size=BATCH)
    add_run(source)
    sync([source], store_target, batch_size=BATCH)  # read in part
    # gone: runs in the middle, in a run of many batches, and the very top ones
    doomed = [*range(100, 150), *range(400, 700), *range(RUNS - 20, RUNS + 2)]
    prune(source, doomed)
    # changed: finished rows rewritten by another writer, far apart
    write(source, "UPDATE run_outcomes SET outcome = 'failure' WHERE run_id % 97 = 3")
    write(source, "UPDATE runs SET goal = goal || ' (renamed)' WHERE id % 211 = 5")
    write(source, "UPDATE session_turns SET reply = 'again' WHERE id % 50 = 7")
    added = [add_run(source) for _ in range(3)]

    report = sync([source], store_target, batch_size=BATCH)

    assert mirror_problems(store_target, source) == []
    counts = report.origins[0].counts
    assert counts.deleted["runs"] == len(doomed)  # RUNS + 1 is the run added above
    assert counts.inserted["runs"] == len(added)
    assert counts.updated["run_outcomes"] > 0
    assert row_count(store_target, Run) == source_runs(source)
    again = sync([source], store_target, batch_size=BATCH)
    assert again.rows == 0
    assert mirror_problems(store_target, source) == []


def test_a_prune_of_every_run_but_a_few_is_mirrored(tmp_path: Path, store_target: str) -> None:
    """Many more entries gone than rows left: the map is read past the source's last key."""
    source = widened(tmp_path / "host.sqlite3", RUNS)
    sync([source], store_target, batch_size=BATCH)
    prune(source, [*range(1, 10), *range(12, RUNS + 1)])

    sync([source], store_target, batch_size=BATCH)

    assert mirror_problems(store_target, source) == []
    assert row_count(store_target, Run) == 2


def test_a_restored_backup_of_a_big_source_is_mirrored_exactly(
    tmp_path: Path, store_target: str
) -> None:
    source = widened(tmp_path / "host.sqlite3", RUNS)
    sync([source], store_target, batch_size=BATCH)
    backup = tmp_path / "host.sqlite3.bak"
    shutil.copyfile(source, backup)
    for _ in range(3):
        add_run(source)
    sync([source], store_target, batch_size=BATCH)
    shutil.copyfile(backup, source)
    write(source, "UPDATE run_outcomes SET outcome = 'failure' WHERE run_id % 97 = 3")
    add_run(source)  # an id the centre had under another run

    report = sync([source], store_target, batch_size=BATCH)

    assert report.origins[0].reread is not None
    assert mirror_problems(store_target, source) == []
    assert row_count(store_target, Run) == source_runs(source)
    assert sync([source], store_target, batch_size=BATCH).rows == 0


def test_changes_made_while_a_run_is_held_arrive_and_the_run_follows_once_repaired(
    tmp_path: Path, store_target: str
) -> None:
    """While a run is held every table is compared whole each pass: a prune, a change and an
    insert made meanwhile arrive; the held run is neither sent nor doubled, and comes once its
    value is repaired."""
    source = widened(tmp_path / "host.sqlite3", RUNS)
    sync([source], store_target, batch_size=BATCH)
    bad = add_run(source)
    if "://" in store_target:  # a NUL PostgreSQL text cannot hold
        spoiled = ("steps", "result", "'a' || char(0) || 'b'", "'repaired'")
    else:  # text where a run's parent id belongs, which no sync can link
        spoiled = ("runs", "parent_run_id", "'abc'", "NULL")
    table, column, value, fixed = spoiled
    key = "id" if table == "runs" else "run_id"
    write(source, f"UPDATE {table} SET {column} = {value} WHERE {key} = ?", bad)
    sync([source], store_target, batch_size=BATCH)
    assert [q.run for q in quarantined(store_target)] == [bad]

    prune(source, list(range(300, 340)))
    write(source, "UPDATE run_outcomes SET outcome = 'failure' WHERE run_id % 97 = 3")
    add_run(source)
    sync([source], store_target, batch_size=BATCH)
    assert [q.run for q in quarantined(store_target)] == [bad]
    assert row_count(store_target, Run) == source_runs(source) - 1  # all but the held run

    write(source, f"UPDATE {table} SET {column} = {fixed} WHERE {key} = ?", bad)
    sync([source], store_target, batch_size=BATCH)
    assert quarantined(store_target) == []
    assert mirror_problems(store_target, source) == []
    assert row_count(store_target, Run) == source_runs(source)
