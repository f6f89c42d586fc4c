"""Sync carries what the source holds, as the source means it: event JSON naming central runs,
memory a deleted shadow uncovers, archives whatever the goal was, and nothing it does not know
dropped in silence."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.synccheck import add_session, mirror_problems, write_source

from harness_store import StepRecord, Store
from harness_store.records import RunEvent
from harness_store.sync import SyncRefusedError, central_run, list_origins, sync
from harness_store.transfer import UnknownTablesError


@pytest.mark.slow_on("postgresql")
def test_event_json_names_the_central_run(store_target: str, tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(a, runs=1, tag="a")
    write_source(b, runs=1, tag="b")
    with Store.open(b) as store:
        store.put_event(RunEvent.new(1, 1, "started", goal="goal B"))
    sync([a], store_target)
    sync([b], store_target)
    origin_b = next(o.uuid for o in list_origins(store_target) if o.path == str(b.resolve()))
    central = central_run(store_target, origin_b, 1)
    assert central is not None and central != 1
    with Store.open(store_target, read_only=True) as store:
        ((cursor, event),) = store.events_since(central, 0, 10)
    assert event.run_id == central and event.fields["goal"] == "goal B"
    shown = run_in_process("events", store_target, "--run", str(central), "--json")
    assert shown.returncode == 0, shown.stderr
    lines = [json.loads(line) for line in shown.stdout.splitlines() if line.strip()]
    printed = lines[0] if isinstance(lines[0], dict) else lines[0][0]
    assert printed["run_id"] == central and printed["cursor"] == cursor


@pytest.mark.slow_on("postgresql")
def test_a_shadowed_memory_entry_reappears_when_its_shadow_is_deleted(
    store_target: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(a, runs=1, tag="a")
    write_source(b, runs=1, tag="b")
    with Store.open(a) as store:
        store.memory_put("/repo", "build", "make", 1, 1)
    with Store.open(b) as store:
        store.memory_put("/repo", "build", "cargo build", 1, 1)  # newer: shadows a's
    sync([a, b], store_target)
    with Store.open(store_target, read_only=True) as store:
        assert store.memory_get("/repo", "build").value == "cargo build"
    with Store.open(b) as store:
        assert store.memory_delete("/repo", "build")
    sync([a, b], store_target)
    with Store.open(store_target, read_only=True) as store:
        held = store.memory_get("/repo", "build")
    assert held is not None and held.value == "make"


@pytest.mark.slow_on("postgresql")
def test_an_archive_propagates_when_the_goal_was_already_empty(
    store_target: str, tmp_path: Path
) -> None:
    src = tmp_path / "src.sqlite3"
    with Store.open(src) as store:
        run = store.start_run("", "/x")
        store.checkpoint_steps(run, [StepRecord.new(1, "sk-live-123", "ok")])
    session = add_session(src, [run])
    sync([src], store_target)
    with Store.open(src) as store:
        store.archive_session(session)
    sync([src], store_target)
    assert mirror_problems(store_target, src) == []


def _future_source(path: Path) -> None:
    write_source(path, runs=1)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE future_things (id INTEGER PRIMARY KEY, what TEXT)")
        conn.execute("INSERT INTO future_things (what) VALUES ('kept?')")
        conn.execute("ALTER TABLE steps ADD COLUMN verdict_v67 TEXT")


@pytest.mark.slow_on("postgresql")
def test_a_source_of_a_newer_io_harness_is_refused_naming_what_it_has(
    store_target: str, tmp_path: Path
) -> None:
    future = tmp_path / "future.sqlite3"
    _future_source(future)
    with pytest.raises(SyncRefusedError) as refused:
        sync([future], store_target)
    (left_out,) = refused.value.refused
    assert isinstance(left_out.error, UnknownTablesError)
    assert "future_things (1 rows)" in str(left_out.error)
    assert "steps.verdict_v67" in str(left_out.error)
    assert list_origins(store_target) == []
    shown = run_in_process("sync", future, store_target)
    assert shown.returncode != 0
    assert "future_things (1 rows)" in shown.stderr + shown.stdout
    assert "steps.verdict_v67" in shown.stderr + shown.stdout
