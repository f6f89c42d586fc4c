"""A store keeps its identity across `copy` and `sync`: a centre seeded with `copy` knows the
store it was copied from as an origin, so a `sync` of that store sends only what changed
since the copy, never its runs again; a centre that holds a store's runs under no origin (a
copy made before copies recorded their source) is refused by name, nothing sent. Both
backends as the centre."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.clirun import run_in_process
from support.synccheck import add_session, mirror_problems, row_count, write_source

from harness_store import StepRecord, Store
from harness_store.errors import CopiedWithoutOriginError
from harness_store.models import Run, Step
from harness_store.sync import SyncRefusedError, list_origins, sync
from harness_store.transfer import copy_store


def test_copy_then_sync_sends_nothing_again(store_target: str, tmp_path: Path) -> None:
    """The issue's own commands: three runs copied, then synced, are three runs."""
    host = tmp_path / "host.sqlite3"
    write_source(host, runs=3)
    add_session(host, [1, 3])
    runs = row_count(str(host), Run)
    copied = run_in_process("copy", host, store_target)
    assert copied.returncode == 0, copied.stderr
    synced = run_in_process("sync", host, store_target, "--json")
    assert synced.returncode == 0, synced.stderr
    assert '"new_origin": false' in synced.stdout and '"rows": 0' in synced.stdout
    assert row_count(store_target, Run) == runs and row_count(store_target, Step) == row_count(
        str(host), Step
    )
    (origin,) = list_origins(store_target)
    assert origin.path == str(host.resolve()) and origin.runs == runs
    assert mirror_problems(store_target, host, skip=()) == []


def test_what_changed_after_the_copy_is_synced_exactly(store_target: str, tmp_path: Path) -> None:
    """New rows, rows updated in place, deletions and an archive after the copy reach the
    centre once each; the copied runs keep their ids."""
    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=3)
    copy_store(host, store_target)
    with Store.open(host) as store:
        store.checkpoint_steps(roots[2], [StepRecord.new(6, "more", "ok")])
        store.finish_run(roots[2], "failed: gave up")
        store.memory_put("/ws", "k0", "overwritten", roots[2], 6)
        store.memory_delete("/ws", "k1")
        store.start_run("later", "/x")
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute("UPDATE steps SET decision = '', prompt = '' WHERE run_id = ?", (roots[1],))
        conn.execute("UPDATE runs SET goal = '' WHERE id = ?", (roots[1],))
    report = sync([host], store_target)
    counts = report.origins[0].counts
    assert not report.origins[0].new_origin
    assert counts.inserted["runs"] == 1 and counts.inserted["steps"] == 1
    assert counts.updated["steps"] == 5  # the archived run's steps, sent again
    assert counts.deleted["memory"] == 1
    assert row_count(store_target, Run) == row_count(str(host), Run)
    assert mirror_problems(store_target, host, skip=()) == []
    with Store.open(store_target) as centre:
        assert centre.outcome(roots[2]) == "failed: gave up"  # the same id as in the host
    assert sync([host], store_target).rows == 0


def forget_origins(target: str) -> None:
    """Make the centre what a copy left before copies recorded their source: no sync
    tables."""
    tables = ("hs_sync_ids", "hs_sync_marks", "hs_sync_origins")
    if "://" not in target:
        with closing(sqlite3.connect(target)) as conn, conn:
            for table in tables:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
        return
    engine = create_engine(target)
    try:
        with engine.begin() as conn:
            for table in tables:
                conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    finally:
        engine.dispose()


def test_a_centre_holding_the_runs_under_no_origin_is_refused(
    store_target: str, tmp_path: Path
) -> None:
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    write_source(host, runs=2, tag="h")
    write_source(other, runs=1, tag="o")
    copy_store(host, store_target)
    forget_origins(store_target)
    runs = row_count(store_target, Run)
    with pytest.raises(SyncRefusedError) as refused:
        sync([host, other], store_target)
    (why,) = refused.value.refused
    assert isinstance(why.error, CopiedWithoutOriginError) and why.source == str(host)
    assert "copy" in str(why.error)
    assert row_count(store_target, Run) == runs + row_count(str(other), Run)  # the other went
    done = run_in_process("sync", host, store_target)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(host) in done.stderr
    assert row_count(store_target, Run) == runs + row_count(str(other), Run)


def test_a_store_marked_after_its_copy_keeps_the_origin_the_copy_recorded(
    store_target: str, tmp_path: Path
) -> None:
    host = tmp_path / "host.sqlite3"
    write_source(host, runs=2)
    copy_store(host, store_target)
    first = sync([host], store_target, mark=True).origins[0]
    assert not first.new_origin and first.counts.rows == 0 and first.marked
    (origin,) = list_origins(store_target)
    assert first.origin == origin.uuid
    assert sync([host], store_target).rows == 0
    assert row_count(store_target, Run) == row_count(str(host), Run)


def test_a_store_marked_before_its_copy_is_known_by_its_mark(
    store_target: str, tmp_path: Path
) -> None:
    marked = tmp_path / "marked.sqlite3"
    write_source(marked, runs=2)
    sync([marked], tmp_path / "elsewhere.sqlite3", mark=True)  # now it carries a mark
    copied = copy_store(marked, store_target).origin
    again = sync([marked], store_target).origins[0]
    assert again.origin == copied and not again.new_origin and again.counts.rows == 0
    assert row_count(store_target, Run) == row_count(str(marked), Run)


def test_a_store_sync_refuses_is_copied_without_an_origin_and_refused_by_sync(
    tmp_path: Path,
) -> None:
    """A step whose run id is text (a SQLite centre holds it, a sync cannot link it): the copy
    is made and records no origin; a sync of the store then refuses it by name, sends nothing."""
    host, centre = tmp_path / "host.sqlite3", tmp_path / "centre.sqlite3"
    write_source(host, runs=2)
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute("UPDATE steps SET run_id = 'abc' WHERE id = 2")
    assert copy_store(host, centre).origin is None
    runs, steps = row_count(str(centre), Run), row_count(str(centre), Step)
    with pytest.raises(SyncRefusedError):
        sync([host], centre)
    assert (row_count(str(centre), Run), row_count(str(centre), Step)) == (runs, steps)
