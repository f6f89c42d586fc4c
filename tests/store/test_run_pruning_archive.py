"""`prune_runs(archive=FILE)`: the archive receives exactly the rows pruned, at head, readable
by `Store.open` and by io-harness 0.66 itself; a prune killed at any point leaves every run
whole in the source, or whole in the archive and gone from the source — never in neither."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from harness_store import Store, copy_store
from harness_store.models import Base
from harness_store.records import StepRecord
from harness_store.store.retention_rows import RUN_TABLES

from .conftest import NEWEST

PRUNER = Path(__file__).with_name("retention_pruner.py")
KEYED = [("runs", "id"), *RUN_TABLES]


def url_of(target: str | Path) -> str:
    return str(target) if "://" in str(target) else f"sqlite:///{target}"


def rows_by_run(target: str | Path) -> dict[int, dict[str, list[tuple[str, ...]]]]:
    """Every run-keyed row of the store, grouped by run and table (ids included)."""
    engine = create_engine(url_of(target))
    out: dict[int, dict[str, list[tuple[str, ...]]]] = {}
    with engine.connect() as conn:
        for name, key in KEYED:
            t = Base.metadata.tables[name]
            for row in conn.execute(select(t)):
                run = int(row._mapping[key])
                out.setdefault(run, {}).setdefault(name, []).append(tuple(map(repr, row)))
    engine.dispose()
    for tables in out.values():
        for rows in tables.values():
            rows.sort()
    return out


def source_of(upstream: Path, store_target: str) -> str:
    if store_target.endswith(".sqlite3"):
        return str(upstream)
    copy_store(upstream, store_target)
    return store_target


@pytest.mark.slow_on("postgresql")
def test_the_archive_holds_exactly_the_pruned_rows_and_upstream_reads_it(
    tmp_path: Path, upstream_path: Path, oracles: Any, store_target: str
) -> None:
    upstream_dump = oracles.dump(NEWEST, upstream_path)
    source = source_of(upstream_path, store_target)
    archive = tmp_path / "archive.sqlite3"
    with Store.open(source, backup=False) as store:
        # Decide what run 1 waits for, so its tree (1 and its child 2) can go.
        for pending in store.unresolved_approvals(1):
            store.resolve_pending(pending.id, "approve")
        for question in store.questions(1):
            store.answer_question(question.id, "yes", "tester")
        traces = {run: store.canonical_trace(run) for run in (1, 2)}
        before = rows_by_run(source)
        dry = store.prune_runs(before="9999-01-01", archive=archive, dry_run=True)
        assert not archive.exists(), "a dry run wrote the archive"
        pruned = store.prune_runs(before="9999-01-01", archive=archive)
        assert pruned == dry and pruned.run_ids == [1, 2] and pruned.tables == dry.tables
        assert len(pruned.tables) > 25, pruned.tables  # upstream's script wrote nearly every table
        assert store.runs() == [9, 8, 7, 6, 4, 3]
    after = rows_by_run(source)
    archived = rows_by_run(archive)
    assert set(archived) == {1, 2}
    for run in (1, 2):
        assert run not in after
        assert archived[run] == before[run], run
    for run, tables in after.items():
        assert tables == before[run], run
    with Store.open(archive) as opened:
        assert opened.runs() == [2, 1]
        assert {run: opened.canonical_trace(run) for run in (1, 2)} == traces
    # io-harness 0.66 reads the archived runs as it read them in the store they came from
    # (but for what this test decided before the prune).
    theirs = oracles.dump(NEWEST, archive)
    assert theirs["run_ids"] == [1, 2]
    for run, was in zip(theirs["runs"], upstream_dump["runs"][:2], strict=True):
        differ = sorted(k for k in was if run[k] != was[k])
        decided = ["questions", "unresolved_approvals"] if run["id"] == 1 else []
        assert differ == decided, differ


def fill(target: str, runs: int) -> None:
    with Store.open(target, backup=False) as store, store.transaction():
        for i in range(runs):
            run = store.start_run(f"goal {i}", "plan.toml")
            for step in range(1, 6):
                store.checkpoint_step(run, StepRecord(step, "decide", f"result {i}", tokens=3))
            if i % 3 == 0:
                child = store.start_child_run("child", "plan.toml", run, 1)
                store.checkpoint_step(child, StepRecord(1, "decide", "child", tokens=1))
                store.finish_run(child, "success")
            store.finish_run(run, "success")


@pytest.mark.slow_on("postgresql")
def test_a_prune_killed_at_any_point_leaves_every_run_somewhere_whole(
    tmp_path: Path, store_target: str
) -> None:
    fill(store_target, 150)
    original = rows_by_run(store_target)
    archive = tmp_path / "archive.sqlite3"
    rng = random.Random(29)
    kills = 0
    for attempt in range(6):
        proc = subprocess.Popen(
            [sys.executable, str(PRUNER), store_target, str(archive), "40"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        # Kill after a random number of committed batches, at a random moment of the next.
        for _ in range(rng.randint(0, 4)):
            if not proc.stdout.readline().startswith("batch"):
                break
        if attempt < 5:
            try:
                proc.wait(timeout=rng.uniform(0.0, 0.4))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                kills += 1
        proc.wait(timeout=300)
        left, kept = rows_by_run(store_target), rows_by_run(archive) if archive.exists() else {}
        for run, rows in original.items():
            if run in left:
                assert left[run] == rows, (attempt, run)  # whole in the source
            else:
                assert kept.get(run) == rows, (attempt, run)  # or whole in the archive
        assert set(kept) <= set(original)
    assert kills >= 3
    assert rows_by_run(store_target) == {}
    assert rows_by_run(archive) == original
