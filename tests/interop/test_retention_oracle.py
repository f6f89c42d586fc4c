"""Retention on a store upstream filled: the oracle's script leaves rows in every table 0.66
has, so a session made of its runs, deleted, must leave no row keyed to them anywhere — on
SQLite as upstream wrote it, and on PostgreSQL after `copy_store`. Sizes and archives agree
with upstream's own figures for the same store."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select

from harness_store import Pruned, Store, copy_store
from harness_store.models import Base
from harness_store.store.retention_rows import RUN_TABLES

from .oracles import Oracles
from .releases import NEWER_WRITERS
from .rustdebug import parse

NEWEST = NEWER_WRITERS[-1]
RUN_KEYS = ("run_id", "parent_run_id", "to_run_id", "from_run_id", "child_run_id")


def upstream_store(tmp_path: Path, oracles: Oracles, target: str) -> str:
    path = tmp_path / "upstream.sqlite3"
    oracles.run(NEWEST, "write", path)
    if target.endswith(".sqlite3"):
        return str(path)
    copy_store(path, target)
    return target


def rows_naming(target: str, runs: set[int]) -> dict[str, int]:
    """Rows of every table whose run-keyed columns name one of `runs`."""
    url = target if "://" in target else f"sqlite:///{target}"
    engine = create_engine(url)
    found = {}
    with engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            if table.name == "memory":  # the workspace's, not the run's (see below)
                continue
            for key in RUN_KEYS:
                if key in table.c:
                    n = conn.execute(
                        select(func.count()).select_from(table).where(table.c[key].in_(runs))
                    ).scalar()
                    if n:
                        found[f"{table.name}.{key}"] = int(n or 0)
            if table.name == "runs":
                n = conn.execute(
                    select(func.count()).select_from(table).where(table.c.id.in_(runs))
                ).scalar()
                if n:
                    found["runs.id"] = int(n or 0)
    engine.dispose()
    return found


def test_every_run_keyed_table_is_in_the_deletion_list() -> None:
    keyed = {t.name for t in Base.metadata.sorted_tables if set(RUN_KEYS) & set(t.c.keys())}
    # Beside the list: the runs themselves and the turns (deleted by key), and memory, which
    # belongs to the workspace (an entry only names the run that wrote it) and stays, as
    # upstream keeps it.
    assert keyed - {name for name, _ in RUN_TABLES} == {"runs", "session_turns", "memory"}


@pytest.mark.slow_on("postgresql")
def test_deleting_a_session_of_upstream_runs_leaves_no_orphan_anywhere(
    tmp_path: Path, oracles: Oracles, store_target: str
) -> None:
    target = upstream_store(tmp_path, oracles, store_target)
    with Store.open(target, backup=False) as store:
        session = store.create_session("/ws/one")
        store.record_turn(session, None, 1, "the root and its child")
        runs = {1, 2}
        before = rows_naming(target, runs)
        assert len(before) > 30, before  # the script touched nearly every table
        size = store.session_size(session)
        assert size is not None and (size.turns, size.runs) == (1, 2)
        dry = store.delete_session(session, dry_run=True)
        assert rows_naming(target, runs) == before, "a dry run changed something"
        assert (dry.rows, dry.bytes, dry.runs) == (size.rows, size.bytes, 2)
        assert store.delete_session(session) == dry
        assert rows_naming(target, runs) == {}
        assert store.session_size(session) is None
        assert store.delete_session(session) == Pruned()
        # Runs outside the session keep every row.
        assert store.run_summary(3) is not None


@pytest.mark.slow_on("postgresql")
def test_sizes_and_archives_agree_with_upstreams_figures(
    tmp_path: Path, oracles: Oracles, store_target: str
) -> None:
    target = upstream_store(tmp_path, oracles, store_target)
    path = tmp_path / "upstream.sqlite3"
    dumped = oracles.dump(NEWEST, path)["sessions"][0]
    with Store.open(target, backup=False) as store:
        size = store.session_size(dumped["id"])
        theirs = parse(dumped["size"])
        assert size is not None
        assert (size.turns, size.runs, size.rows, size.bytes) == (
            theirs["turns"],
            theirs["runs"],
            theirs["rows"],
            theirs["bytes"],
        )
        archived = store.archive_session(dumped["id"])
        assert archived.turns == 2 and archived.bytes > 0
        turns = store.session_turns(dumped["id"])
        assert [(t.prompt, t.reply, t.outcome) for t in turns] == [
            ("", "", "done"),
            ("", "", "cancelled"),
        ]
        assert store.archive_session(dumped["id"], dry_run=True).bytes == 0
    if target == str(path):
        # upstream reads the archived session as we do
        after = oracles.dump(NEWEST, path)["sessions"][0]
        assert parse(after["turns"])[0]["prompt"] == ""


@pytest.mark.parametrize("status", ["running", "paused", "interrupted"])
@pytest.mark.slow_on("postgresql")
def test_a_sweep_keeps_sessions_that_can_still_resume(
    store: Store, store_target: str, status: str
) -> None:
    old, live, new = (store.create_session(f"/ws/{i}") for i in range(3))
    for session in (old, live, new):
        run = store.start_run("turn", "")
        store.record_turn(session, None, run, "p")
        if session != live:
            store.finish_run(run, "passed")
        elif status == "paused":
            store.set_status(run, "paused")
    cut = store.session_turns(new)[0].created_at
    from sqlalchemy import update

    from harness_store import models as m

    # The third session is made newer than the cut through a second, plain handle (the
    # store under test may be an AsyncStore, whose connections belong to its event loop).
    with Store.open(store_target) as direct, direct._write() as conn:
        conn.execute(update(m.Session).where(m.Session.id == new).values(created_at="9999"))
        if status == "interrupted":  # a status upstream does not know reads as running
            turn = direct.session_turns(live)[0]
            conn.execute(update(m.Run).where(m.Run.id == turn.run_id).values(status=status))
    assert store.sweep_sessions("9999", dry_run=True).sessions == 1
    pruned = store.sweep_sessions("9999")
    assert (pruned.sessions, pruned.refused) == (1, [live])
    assert store.session_root(old) is None and store.session_root(live) == "/ws/1"
    assert store.session_root(new) == "/ws/2" and cut


@pytest.mark.slow_on("postgresql")
def test_store_size_and_compact_say_what_the_store_holds(store: Store) -> None:
    session = store.create_session("/ws")
    for _ in range(30):
        run = store.start_run("turn " * 200, "")
        store.record_turn(session, None, run, "prompt " * 500)
        store.finish_run(run, "passed")
    size = store.store_size()
    assert (size.sessions, size.runs) == (1, 30) and size.file_bytes > 0
    assert size.tables and size.tables == sorted(size.tables, key=lambda t: (-t[1], t[0]))
    store.delete_session(session)
    reclaimed = store.compact()
    assert reclaimed >= 0
    after = store.store_size()
    assert (after.sessions, after.runs) == (0, 0)
    if store.backend.name == "sqlite":
        assert after.free_bytes == 0 and reclaimed > 0
