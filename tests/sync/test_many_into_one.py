"""`harness_store.sync`: many SQLite stores into one, on SQLite and PostgreSQL destinations.

Each test checks the destination against the sources row for row (`synccheck.mirror_problems`:
every row of every table of each origin, every link remapped), not just counts.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support.synccheck import add_session, mirror_problems, row_count, write_source

from harness_store import StepRecord, Store
from harness_store.engine import make_engine, read_only_url
from harness_store.errors import StoreNotFoundError, UpgradeRequiredError
from harness_store.models import Memory, Run, Step
from harness_store.schema.detect import StoreKind, diagnose
from harness_store.sync import (
    RULES,
    SyncRefusedError,
    central_run,
    list_origins,
    origin_runs,
    source_run,
    sync,
)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow_on("postgresql")
def test_two_stores_mirror_and_a_second_sync_sends_nothing(
    store_target: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    write_source(a, tag="a")
    write_source(b, tag="b")
    add_session(a, [1, 3])
    before = file_digest(a), file_digest(b)
    first = sync([a, b], store_target)
    assert all(o.new_origin for o in first.origins)
    assert mirror_problems(store_target, a) == [] and mirror_problems(store_target, b) == []
    assert row_count(store_target, Run) == 12 and row_count(store_target, Step) == 2 * (3 * 5 + 3)
    second = sync([a, b], store_target)
    assert second.rows == 0 and not any(o.new_origin for o in second.origins)
    assert row_count(store_target, Run) == 12 and row_count(store_target, Step) == 36
    assert (file_digest(a), file_digest(b)) == before  # nothing written to a source
    assert mirror_problems(store_target, a) == [] and mirror_problems(store_target, b) == []


@pytest.mark.slow_on("postgresql")
def test_incremental_sync_sends_new_rows_updates_and_deletions(
    store_target: str, tmp_path: Path
) -> None:
    src = tmp_path / "src.sqlite3"
    roots = write_source(src, runs=3)
    session = add_session(src, [roots[0]])
    sync([src], store_target)
    with Store.open(src) as store:
        store.checkpoint_steps(roots[2], [StepRecord.new(6, "more", "ok")])  # new rows
        store.finish_run(roots[2], "failed: gave up")  # status and outcome in place
        (pending,) = store.pending_for_run(roots[1])
        assert store.resolve_pending(pending.id, "approved")  # resolved in place
        store.memory_put("/ws", "k0", "overwritten", roots[2], 6)  # upsert
        store.memory_delete("/ws", "k1")  # deletion
        new_run = store.start_run("later", "/x")
    with closing(sqlite3.connect(src)) as conn, conn:
        turn = conn.execute(
            "INSERT INTO session_turns (session_id, parent_turn_id, run_id, prompt) "
            "VALUES (?, 1, ?, 'again')",
            (session, new_run),
        ).lastrowid
        conn.execute("UPDATE sessions SET head_turn_id = ? WHERE id = ?", (turn, session))
    report = sync([src], store_target)
    counts = report.origins[0].counts
    assert counts.inserted["steps"] == 1 and counts.inserted["runs"] == 1
    assert counts.updated["runs"] == 1 and counts.updated["pending_approvals"] == 1
    assert counts.updated["memory"] == 1 and counts.deleted["memory"] == 1
    assert counts.updated["sessions"] == 1 and counts.inserted["session_turns"] == 1
    assert mirror_problems(store_target, src, skip=()) == []
    with Store.open(store_target) as central:
        dest_root = central_run(store_target, str(src), roots[2])
        assert dest_root is not None
        assert central.outcome(dest_root) == "failed: gave up"
        assert [e.key for e in central.memory_list("/ws")] == ["k2", "k0"]
    assert sync([src], store_target).rows == 0


@pytest.mark.slow_on("postgresql")
def test_pruned_and_archived_runs_propagate(store_target: str, tmp_path: Path) -> None:
    """io-harness 0.58's `delete_session` deletes a session's runs and every row hanging off
    them; `archive_session` empties their text (the run's goal included). Both reach the
    destination."""
    src = tmp_path / "src.sqlite3"
    roots = write_source(src, runs=3)
    sync([src], store_target)
    doomed = central_run(store_target, str(src), roots[0])
    with closing(sqlite3.connect(src)) as conn, conn:
        for rule in RULES:  # upstream's RUN_TABLES: every table keyed by a run
            if rule.run_column and rule.table != "memory":
                conn.execute(f"DELETE FROM {rule.table} WHERE {rule.run_column} IN (1, 2)")
        conn.execute("DELETE FROM runs WHERE id IN (1, 2)")
        conn.execute("UPDATE steps SET decision = '', prompt = '' WHERE run_id = ?", (roots[1],))
        conn.execute("UPDATE runs SET goal = '' WHERE id = ?", (roots[1],))
    report = sync([src], store_target)
    counts = report.origins[0].counts
    assert counts.deleted["runs"] == 2 and counts.deleted["steps"] == 6
    assert counts.updated["steps"] == 5  # the archived run's steps, sent again
    assert mirror_problems(store_target, src) == []
    with Store.open(store_target) as central:
        assert doomed is not None and doomed not in central.runs()
    assert sync([src], store_target).rows == 0


@pytest.mark.slow_on("postgresql")
def test_twenty_origins_with_colliding_ids_read_as_one_store(
    store_target: str, tmp_path: Path
) -> None:
    sources = []
    for n in range(20):
        path = tmp_path / f"m{n}.sqlite3"
        write_source(path, runs=2, steps=3, tag=f"m{n}-")
        sources.append(path)
    report = sync(sources, store_target)
    assert len({o.origin for o in report.origins}) == 20
    for path in sources:
        assert mirror_problems(store_target, path) == [], path
    with Store.open(store_target) as central:
        assert len(central.runs()) == 20 * 4
        for path in sources:
            root = central_run(store_target, str(path), 1)
            assert root is not None
            assert source_run(store_target, root) is not None
            tree = central.tree(root)
            assert [n.run_id for n in tree][1:] == [central_run(store_target, str(path), 2)]
            assert central.spent_tokens_tree(root) == sum(range(1, 4)) + 7
            assert central.steps(root)[0].decision == f"d{path.stem}-0.1"
    origins = list_origins(store_target)
    assert len(origins) == 20 and all(o.runs == 4 for o in origins)
    # origins are listed in the order they were first synced, which parallel workers choose:
    # find the fourth source's origin by its path
    fourth = next(o for o in origins if o.path == str(sources[3]))
    assert origin_runs(store_target, fourth.uuid) == sorted(
        central_run(store_target, str(sources[3]), r) for r in (1, 2, 3, 4)
    )
    assert sync(sources, store_target).rows == 0


@pytest.mark.slow_on("postgresql")
def test_concurrent_syncs_of_the_same_stores_take_turns(store_target: str, tmp_path: Path) -> None:
    """Two processes syncing the same new stores at once: each origin is registered once and
    nothing doubles (the second waits on the origin's row, or retries its registration)."""
    import subprocess
    import sys

    sources = []
    for n in range(3):
        path = tmp_path / f"c{n}.sqlite3"
        write_source(path, runs=3, steps=300, tag=f"c{n}")
        sources.append(path)
    sync([], store_target)  # the schema first: two processes building it is another race
    script = "import sys; from harness_store.sync import sync; sync(sys.argv[2:], sys.argv[1])"
    procs = [
        subprocess.Popen([sys.executable, "-c", script, store_target, *map(str, sources)])
        for _ in range(2)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(list_origins(store_target)) == 3
    for path in sources:
        assert mirror_problems(store_target, path) == []


def test_mark_writes_only_the_origin_and_follows_a_copied_store(tmp_path: Path) -> None:
    src, dest = tmp_path / "src.sqlite3", tmp_path / "dest.sqlite3"
    write_source(src, runs=1)
    first = sync([src], dest)  # unmarked: known by file identity
    marked = sync([src], dest, mark=True)
    assert marked.origins[0].origin == first.origins[0].origin and marked.rows == 0
    with closing(sqlite3.connect(src)) as conn:
        assert conn.execute("SELECT uuid FROM hs_sync_origin").fetchall() == [
            (first.origins[0].origin,)
        ]
        assert diagnose_kind(src) is StoreKind.TRACKED  # still the store it was
    with Store.open(src) as store:
        assert sorted(store.runs()) == [1, 2]
    moved = tmp_path / "elsewhere.sqlite3"
    moved.write_bytes(src.read_bytes())  # a new file: a new inode, the same mark
    src.unlink()
    again = sync([moved], dest)
    assert again.origins[0].origin == first.origins[0].origin and again.rows == 0
    assert list_origins(dest)[0].path == str(moved.resolve())


def diagnose_kind(path: Path) -> StoreKind:
    engine = make_engine(read_only_url(path))
    try:
        with engine.connect() as conn:
            return diagnose(conn).kind
    finally:
        engine.dispose()


def test_a_new_store_at_a_reused_path_is_a_new_origin(tmp_path: Path) -> None:
    src, dest = tmp_path / "src.sqlite3", tmp_path / "dest.sqlite3"
    write_source(src, runs=1, tag="old")
    sync([src], dest)
    for side in tmp_path.glob("src.sqlite3*"):
        side.unlink()
    write_source(src, runs=1, tag="new")  # may well get the old inode back
    report = sync([src], dest)
    assert report.origins[0].new_origin
    assert len(list_origins(dest)) == 2 and row_count(str(dest), Run) == 4
    assert mirror_problems(str(dest), src) == [] or len(list_origins(dest)) == 2


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    src, dest = tmp_path / "src.sqlite3", tmp_path / "dest.sqlite3"
    write_source(src, runs=2)
    report = sync([src], dest, dry_run=True)
    assert report.dry_run and report.origins[0].counts.inserted["steps"] == 2 * 6
    assert not dest.exists()  # tests/sync/test_dry_run.py: nothing anywhere, both backends
    assert sync([src], dest).origins[0].new_origin


def test_refusals(tmp_path: Path) -> None:
    dest = tmp_path / "dest.sqlite3"
    with pytest.raises(StoreNotFoundError):
        sync([tmp_path / "missing.sqlite3"], dest)
    old = tmp_path / "old.sqlite3"
    with closing(sqlite3.connect(old)) as conn:
        conn.execute(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, goal TEXT NOT NULL,"
            " file TEXT NOT NULL, outcome TEXT)"
        )
        conn.execute(
            "CREATE TABLE steps (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL "
            "REFERENCES runs(id), step INTEGER NOT NULL, decision TEXT NOT NULL, "
            "result TEXT NOT NULL)"
        )
    with pytest.raises(SyncRefusedError, match="harness-store upgrade") as refused:
        sync([old], dest)
    assert isinstance(refused.value.refused[0].error, UpgradeRequiredError)


@pytest.mark.slow_on("postgresql")
def test_oracle_store_of_every_table_mirrors(store_target: str, tmp_path: Path) -> None:
    """io-harness 0.66's own Store writes a store touching every table; two of them sync
    into one, and the second sync sends nothing."""
    from conftest import SHARED
    from interop.oracles import built_oracles

    folder = built_oracles(SHARED / "oracle").folder
    import subprocess

    paths = []
    for name in ("x", "y"):
        path = tmp_path / f"{name}.sqlite3"
        subprocess.run(
            [str(folder / "oracle-0_66"), "write", str(path)], check=True, capture_output=True
        )
        paths.append(path)
    report = sync(paths, store_target, mark=True)
    assert diagnose_kind(paths[0]) is StoreKind.UPSTREAM  # the mark is no unknown table
    tables = {t for o in report.origins for t in o.counts.inserted}
    assert len(tables) >= 36  # every table the oracle writes (run_leases stays empty)
    for path in paths:
        assert mirror_problems(store_target, path) == []
    assert row_count(store_target, Memory) == 4  # the same workspace keys, held once
    assert sync(paths, store_target).rows == 0


def test_command_syncs_reports_and_lists_origins(tmp_path: Path) -> None:
    import json

    from support.clirun import on_terminal, run_in_process

    a, b, dest = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3", tmp_path / "dest.sqlite3"
    write_source(a, runs=1, tag="a")
    write_source(b, runs=1, tag="b")
    done = run_in_process("sync", a, b, dest)
    assert done.returncode == 0, done.stderr
    assert "synced 2 stores" in done.stdout and done.stdout.count("(new origin)") == 2
    again = run_in_process("sync", a, b, dest, "--json")
    assert json.loads(again.stdout)["rows"] == 0
    listed = run_in_process("origins", dest, "--json")
    assert [o["path"] for o in json.loads(listed.stdout)] == [str(a), str(b)]
    only_b = run_in_process("runs", dest, "--origin", b, "--json")
    assert [r["run_id"] for r in json.loads(only_b.stdout)] == origin_runs(dest, str(b))[::-1]
    unknown = run_in_process("runs", dest, "--origin", "nope")
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    code, screen = on_terminal("sync", a, b, dest)
    assert code == 0 and "stores" in screen and "nothing new" in screen
    usage = run_in_process("sync", dest)
    assert usage.returncode == 2
    missing = run_in_process("sync", tmp_path / "nope.sqlite3", dest)
    assert missing.returncode == 3 and "nope.sqlite3" in missing.stderr


@pytest.mark.parametrize("fixture", ["io-harness-0.22.0/populated", "io-harness-0.29.0/aggregates"])
@pytest.mark.slow_on("postgresql")
def test_stores_of_older_releases_are_read_as_they_are(
    store_target: str, fixture_copy: Any, fixture: str
) -> None:
    """A store io-harness 0.22 or 0.29 wrote (untracked, fewer tables and columns) syncs
    unchanged: the tables it has, its columns, later columns at their defaults centrally."""
    src = fixture_copy(fixture)
    before = file_digest(src)
    report = sync([src], store_target)
    assert report.origins[0].counts.inserted["runs"] > 0
    assert mirror_problems(store_target, src, skip=()) == []
    assert file_digest(src) == before
    assert sync([src], store_target).rows == 0


def test_one_memory_key_of_two_origins_is_held_once_newest_first(
    store_target: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    for path, value in ((a, "from a"), (b, "from b")):
        with Store.open(path) as store:
            run = store.start_run("g", "f")
            store.memory_put("/shared", "k", value, run, 1)
    sync([a, b], store_target)  # b wrote last
    with Store.open(store_target) as central:
        assert [e.value for e in central.memory_list("/shared")] == ["from b"]
    with Store.open(a) as store:
        store.memory_put("/shared", "k", "from a, later", 1, 2)
    sync([a, b], store_target)
    with Store.open(store_target) as central:
        assert [e.value for e in central.memory_list("/shared")] == ["from a, later"]
    assert sync([a, b], store_target).rows == 0
