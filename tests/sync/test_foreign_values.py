"""Values a foreign writer leaves in a source (written here with `sqlite3` directly, as
io-harness or another writer would: NUL in text, bytes that are not UTF-8, a BLOB in a TEXT
column, text or Infinity in an INTEGER column), synced into each backend: each arrives byte-
and type-exact; or its run is quarantined, named (table, row id, column, what is wrong), while
the source's other runs and the other sources are synced (text that is not UTF-8, which no
reader can take, into either centre); or, in a session's own row (no run's), its source is
refused by name with nothing of it written, while the other sources are synced.

Each centre holds a new store before the first sync (`new_store.place`, a copy of one made
once): what sync sends and holds back is the subject here, and a centre made by sync itself
is the same store (sync makes it with `Store.open`), tested where making it is the subject
(tests/sync/test_sync_faithful.py and the others on an empty `store_target`)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.new_stores import NewStore
from support.synccheck import add_session, mirror_problems, write_source

from harness_store.sync import list_origins, quarantined, sync
from sync.foreign import CASES, NOT_UTF8, ROW, put, stored


@pytest.mark.parametrize(("table", "column", "value", "what", "sqlite_holds"), CASES)
def test_a_foreign_value_arrives_exactly_or_its_run_is_quarantined_by_name(
    store_target: str,
    new_store: NewStore,
    tmp_path: Path,
    table: str,
    column: str,
    value: str,
    what: str,
    sqlite_holds: bool,
) -> None:
    new_store.place(store_target)  # a centre already made (see the module)
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    write_source(host, runs=2, tag="h")
    write_source(other, runs=1, tag="o")
    put(host, table, column, value)
    if sqlite_holds and "://" not in store_target:
        sync([host, other], store_target)
        want = sorted(stored(str(host), table, column) + stored(str(other), table, column))
        assert stored(store_target, table, column) == want
        assert sync([host, other], store_target).rows == 0
        return
    sync([host, other], store_target)  # the row's run is held back, the rest goes
    run = ROW if table == "runs" else 1  # `ROW` is a step of run 1
    held = {q.run: q for q in quarantined(store_target)}
    assert run in held, held
    said = f"{held[run].table}.{held[run].column} {held[run].row} {held[run].problem}"
    assert f"{table}.{column}" in said and f"id={ROW}" in said and what in said, said
    assert len(list_origins(store_target)) == 2
    assert mirror_problems(store_target, other) == []


def test_the_command_names_the_row_in_one_line(
    pg_url: str, new_store: NewStore, tmp_path: Path
) -> None:
    """A value in a session's own row (no run's, so none to hold) refuses its source."""
    new_store.place(pg_url)  # a centre already made (see the module)
    host = tmp_path / "host.sqlite3"
    session = add_session(host, write_source(host, runs=1))
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(f"UPDATE sessions SET root = {NOT_UTF8} WHERE id = ?", [session])
    done = run_in_process("sync", host, pg_url)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert str(host) in line and f"sessions.root of the row id={session}" in line
    assert "Traceback" not in done.stderr and "unexpected" not in line


def test_a_repaired_row_is_sent_once(pg_url: str, new_store: NewStore, tmp_path: Path) -> None:
    new_store.place(pg_url)  # a centre already made (see the module)
    host = tmp_path / "host.sqlite3"
    write_source(host, runs=2)
    put(host, "runs", "goal", NOT_UTF8)
    assert [q.run for q in sync([host], pg_url).origins[0].quarantined] == [ROW]
    put(host, "runs", "goal", "'repaired'")
    assert sync([host], pg_url).origins[0].released == (ROW,)
    assert mirror_problems(pg_url, host, skip=()) == []
    assert sync([host], pg_url).rows == 0
