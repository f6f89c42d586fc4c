"""`Store.check` on schema damage a second writer can leave beyond a dropped index or column:
a UNIQUE index dropped while its table gained duplicates, an index recreated on another table,
a view, an emptied `alembic_version` — each a finding, and `repair` fixes only what it can
without failing or losing rows.
"""

from __future__ import annotations

import time

import pytest
from support.processes import Worker

from harness_store import Store
from harness_store.records.health import FindingKind
from harness_store.releases import HEAD

from .checkkit import checked_after, kinds, plant, populated

K = FindingKind


def snapshot_row(run: int) -> str:
    return (
        "INSERT INTO memory_snapshots (run_id, workspace, key, step, state) "
        f"VALUES ({run}, '/w', 'k', 1, 'absent')"
    )


def test_a_dropped_unique_index_over_duplicates_is_named_and_left_to_the_user(
    store_target: str,
) -> None:
    """Before: offered for re-creation, and `repair` then failed with a raw IntegrityError,
    leaving its backup."""
    store, runs = populated(store_target)
    root = runs["root"]
    with store:
        plant(store, "DROP INDEX memory_snapshots_entry", snapshot_row(root), snapshot_row(root))
        report = store.check()
        assert kinds(report) == [("duplicate_rows", "memory_snapshots", (f"{root}//w/k",))]
        (finding,) = report.findings
        assert not finding.repairable and finding.command and finding.count == 1
        repaired = store.repair()
    assert repaired.done == () and repaired.backup is None
    assert repaired.after == report


@pytest.mark.slow_on("postgresql")
def test_an_index_recreated_on_another_table_is_rebuilt(store_target: str) -> None:
    store, _ = populated(store_target)
    with store:
        plant(store, "DROP INDEX run_events_run", "CREATE INDEX run_events_run ON steps (run_id)")
        report = store.check()
        assert kinds(report) == [("index_differs", "run_events", ("run_events_run",))]
        assert "is on steps (run_id), not on run_events" in report.findings[0].detail
        repaired = store.repair()
    assert repaired.done == ("rebuilt index run_events_run on run_events",)
    assert repaired.after.healthy


def test_a_view_is_named(store_target: str) -> None:
    report = checked_after(store_target, "CREATE VIEW mine AS SELECT id FROM runs")
    assert kinds(report) == [("unknown_view", "mine", ("mine",))]
    assert report.findings[0].command == "DROP VIEW mine"


@pytest.mark.slow_on("postgresql")
def test_an_empty_alembic_version_is_named_with_the_stamp_to_write(store_target: str) -> None:
    """Before: healthy, while `harness-store upgrade` then failed on it."""
    report = checked_after(store_target, "DELETE FROM alembic_version")
    assert [(f.kind, f.table) for f in report.findings] == [(K.STAMP, "alembic_version")]
    assert report.findings[0].command == f"alembic -x db=DB stamp {HEAD}"


@pytest.mark.slow_on("postgresql")
def test_check_beside_live_writers_sees_one_moment(store_target: str) -> None:
    """Before, on PostgreSQL: each statement of `check` saw another moment (READ COMMITTED),
    so a child started between the read of the run ids and the read of the trees was a false
    `missing_parent`, and calls recorded between two reads a false `spend_counter`. Two
    writer processes grow trees and record calls while `check` runs again and again; it
    finds nothing each time. (On SQLite a read transaction was always one snapshot.)"""
    store, _ = populated(store_target)
    store.close()
    writers = [Worker.script("tree_writer.py", store_target) for _ in range(2)]
    try:
        for writer in writers:
            writer.wait_line("ready")
        deadline = time.monotonic() + 600  # generous: the machine may be loaded
        with Store.open(store_target, upgrade=False) as checker:
            overlapped = 0
            while overlapped < 20:
                assert time.monotonic() < deadline, f"only {overlapped} checks overlapped"
                for writer in writers:
                    assert writer.proc.poll() is None, writer.stderr
                seen = sum(len(w.lines) for w in writers)
                report = checker.check()
                assert report.findings == (), kinds(report)
                if sum(len(w.lines) for w in writers) > seen:
                    overlapped += 1  # some writer's round was committed during this check
    finally:
        for writer in writers:
            writer.kill()


@pytest.mark.slow_on("postgresql")
def test_a_missing_or_extra_own_index_is_named_and_the_missing_one_created(
    store_target: str,
) -> None:
    """Before: harness_store's `hs_` indexes of `hs1` were never required (a store stamped at
    an upstream release never had them) and never reported when there too much; now the
    revision's shape has them all (the head creates any a store lacks), so each difference
    is a finding and `repair` creates what is missing."""
    store, _ = populated(store_target)
    with store:
        plant(
            store,
            "DROP INDEX hs_runs_parent_run_id",
            "DROP INDEX hs_ledger_observations_run_id",
            "CREATE INDEX hs_steps_run_id_step ON steps (run_id, step)",  # hs1's, gone since hs2
        )
        report = store.check()
        assert kinds(report) == [
            ("missing_index", "ledger_observations", ("hs_ledger_observations_run_id",)),
            ("missing_index", "runs", ("hs_runs_parent_run_id",)),
            ("unknown_index", "steps", ("hs_steps_run_id_step",)),
        ]
        repaired = store.repair()
    assert sorted(repaired.done) == [
        "created index hs_ledger_observations_run_id on ledger_observations",
        "created index hs_runs_parent_run_id on runs",
    ]
    assert kinds(repaired.after) == [("unknown_index", "steps", ("hs_steps_run_id_step",))]
    assert repaired.after.findings[0].command == "DROP INDEX hs_steps_run_id_step"
