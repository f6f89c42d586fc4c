"""Retention cutoffs (both backends): parsed once into an instant (UTC) and compared as one —
an offset is honoured, forms a text comparison would misread are refused before anything is
deleted, and an age reaching before the year 1 is a usage error, not a crash."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import update
from support.clirun import run_in_process

from harness_store import Store
from harness_store import models as m
from harness_store.errors import InvalidValueError

STARTED = "2026-11-15T10:00:00.000Z"
MISREAD = ["20260101", "2026-W01-1", "2026-319", "2026/11/15", "tomorrow"]


def old_runs(store: Store, target: str, n: int = 3) -> list[int]:
    """`n` completed runs, each started on 2026-11-15 at 10:00 UTC."""
    runs = []
    for i in range(n):
        run = store.start_run(f"goal {i}", "plan.toml")
        store.finish_run(run, "success")
        runs.append(run)
    set_started(target, runs, STARTED)
    return runs


def set_started(target: str, runs: list[int], stamp: str) -> None:
    with Store.open(target, backup=False) as plain, plain._write() as conn:
        conn.execute(update(m.Run).where(m.Run.id.in_(runs)).values(started_at=stamp))


@pytest.mark.parametrize("before", MISREAD)
@pytest.mark.slow_on("postgresql")
def test_a_cutoff_in_a_form_it_would_be_misread_in_is_refused(
    store: Store, store_target: str, before: str
) -> None:
    runs = old_runs(store, store_target)
    with pytest.raises(InvalidValueError, match="2026-01-31T12:00:00"):
        store.prune_runs(before=before)
    assert sorted(store.runs()) == runs


@pytest.mark.parametrize(
    ("before", "pruned"),
    [
        ("2026-11-15T12:00:00+05:00", False),  # 07:00 UTC
        ("2026-11-15T15:00:00+05:00", False),  # exactly the runs' start: not before it
        ("2026-11-15T15:00:00.001+05:00", True),
        ("2026-11-15T05:00:00-05:00", False),
        ("2026-11-15T05:00:01-05:00", True),
        ("2026-11-15", False),
        ("2026-11-15T10", False),  # an hour alone: its start
        ("2026-11-15T11", True),
        ("2026-11-16", True),
        ("2026-11-15 10:00:00.5", True),
        ("2026-11-15T10:00:00Z", False),
        ("2026-11-15T10:00:00.000001Z", True),
    ],
)
@pytest.mark.slow_on("postgresql")
def test_a_cutoff_is_compared_as_an_instant(
    store: Store, store_target: str, before: str, pruned: bool
) -> None:
    runs = old_runs(store, store_target)
    done = store.prune_runs(before=before)
    assert done.run_ids == (runs if pruned else []), before
    assert sorted(store.runs()) == ([] if pruned else runs)


def test_a_datetime_cutoff_is_an_instant_and_a_naive_one_is_utc(
    store: Store, store_target: str
) -> None:
    runs = old_runs(store, store_target)
    seven = datetime(2026, 11, 15, 12, tzinfo=timezone(timedelta(hours=5)))
    assert store.prune_runs(before=seven).runs == 0
    assert store.prune_runs(before=datetime(2026, 11, 15, 10, 0, 1)).run_ids == runs


def test_a_stored_start_in_another_stamp_form_is_compared_as_an_instant(
    store: Store, store_target: str
) -> None:
    run, later = old_runs(store, store_target, 2)
    set_started(store_target, [later], "2026-11-15 11:00:00")  # a second-precision stamp
    assert store.prune_runs(before="2026-11-15T10:30:00Z").run_ids == [run]
    assert store.runs() == [later]


def test_cutoff_values() -> None:
    from harness_store.store.cutoff import Cutoff

    assert Cutoff.parse("2026-11-15T12:00:00+05:00").stamp == "2026-11-15T07:00:00.000Z"
    assert Cutoff.parse("2026-01-01").instant == datetime(2026, 1, 1, tzinfo=UTC)
    assert Cutoff.parse("2026-01-01T00:30-01:00").stamp == "2026-01-01T01:30:00.000Z"
    for wrong in ["2026-02-30", "2026-01-01T25:00", "0001-01-01T00:00:00+05:00", 20260101]:
        with pytest.raises(InvalidValueError):
            Cutoff.parse(wrong)
    with pytest.raises(InvalidValueError, match="year 1"):
        Cutoff.ago(99_999_999_999_999, "days")


@pytest.mark.parametrize("runs", [True, False])
@pytest.mark.slow_on("postgresql")
def test_the_command_refuses_a_misread_cutoff_or_age_with_one_line(
    store_target: str, runs: bool
) -> None:
    with Store.open(store_target, backup=False) as store:
        made = old_runs(store, store_target)
        session = store.create_session("/ws")
        store.record_turn(session, None, made[0], "hi")
    unit = ["--runs"] if runs else []
    for cutoff in [["--before", "20260101"], ["--before", "2026-W01-1"]]:
        done = run_in_process("prune", store_target, *unit, *cutoff, "--yes")
        assert done.returncode == 2, done
        assert "2026-01-31T12:00:00" in done.stderr and len(done.stderr.splitlines()) == 1
    done = run_in_process("prune", store_target, *unit, "--older-than", "99999999999999d", "--yes")
    assert done.returncode == 2 and "year 1" in done.stderr, done
    assert len(done.stderr.splitlines()) == 1
    # An offset is honoured: 12:00 at +05:00 is 07:00 UTC, before the runs and the session.
    done = run_in_process(
        "prune", store_target, *unit, "--before", "2026-11-15T12:00:00+05:00", "--yes"
    )
    assert done.returncode == 0, done.stderr
    with Store.open(store_target, backup=False) as store:
        assert sorted(store.runs()) == made
        assert store.session_size(session) is not None
