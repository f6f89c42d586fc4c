"""A run holding a value the centre cannot hold as it is (a NUL in PostgreSQL text, text where
a run's id belongs, text whose bytes are not UTF-8, which no reader can take as text) does not
stop its host's other runs: the whole run is quarantined centrally (its rows' raw values,
byte-exact), named in the sync report, in `check` of the centre and in the command's output,
and sent whole, once, when its source is repaired. Into either centre, each kind of value by
the same tests. Values are written with `sqlite3` directly, as a foreign writer would.

Each centre holds a new store before the first sync (`new_store.place`, a copy of one made
once): what sync sends and holds back is the subject here, and a centre made by sync itself
is the same store (sync makes it with `Store.open`), tested where making it is the subject
(tests/sync/test_sync_faithful.py and the others on an empty `store_target`)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.clirun import run_in_process
from support.new_stores import NewStore
from support.synccheck import mirror_problems, write_source

from harness_store import RunEvent, StepRecord, Store
from harness_store.sync import SyncRefusedError, list_origins, quarantined, sync

NUL = "'a' || char(0) || 'b'"
TABLES = ("runs", "steps", "pending_approvals")
TEXT = "'abc'"


def value_for(dest: str) -> tuple[str, str, str]:
    """A value `dest` cannot hold in a run's row, as (table, column, SQL): a NUL in a step's
    text on PostgreSQL; on SQLite, which holds any value, text where a run's parent id
    belongs (which no sync can link)."""
    return ("steps", "result", NUL) if "://" in dest else ("runs", "parent_run_id", TEXT)


def spoil(path: Path, table: str, column: str, value: str, run: int) -> int:
    """Write `value` into `table.column` of run `run`'s first row there; the row's id."""
    key = "id" if table == "runs" else "run_id"
    with closing(sqlite3.connect(path)) as conn, conn:
        (row,) = conn.execute(f"SELECT min(id) FROM {table} WHERE {key} = ?", [run]).fetchone()
        conn.execute(f"UPDATE {table} SET {column} = {value} WHERE id = ?", [row])
    return int(row)


def repair(path: Path, table: str, column: str, row: int) -> None:
    value = "NULL" if column == "parent_run_id" else "'repaired'"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE {table} SET {column} = {value} WHERE id = ?", [row])


def raw_rows(path: Path, run: int) -> dict[str, list[list[object]]]:
    """Every row of run `run` in the run tables the test writes, each value as its storage
    class and its bytes (as SQLite keeps it)."""
    out: dict[str, list[list[object]]] = {}
    with closing(sqlite3.connect(path)) as conn:
        for table in TABLES:
            key = "id" if table == "runs" else "run_id"
            names = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            cells = ", ".join(f"typeof({n}), CAST({n} AS BLOB)" for n in names)
            rows = conn.execute(f"SELECT {cells} FROM {table} WHERE {key} = ? ORDER BY id", [run])
            out[table] = [
                [(r[i], None if r[i + 1] is None else bytes(r[i + 1])) for i in range(0, len(r), 2)]
                for r in rows
            ]
    return out


def held_rows(entry: object) -> dict[str, list[list[object]]]:
    rows = entry.rows()  # type: ignore[attr-defined]
    return {
        t: [list(r.values()) for r in rows.get(t, [])]
        for t in ("runs", "steps", "pending_approvals")
    }


def central_runs(dest: str) -> list[str]:
    """The goals of the centre's runs."""
    engine = create_engine(dest if "://" in dest else f"sqlite:///{dest}")
    try:
        with engine.connect() as conn:
            return sorted(str(g) for g in conn.execute(text("SELECT goal FROM runs")).scalars())
    finally:
        engine.dispose()


KINDS = ["of its type", "not UTF-8 in a step", "not UTF-8 in a run"]
"""The kinds of value a centre cannot hold, each where a test writes it (`spoilt`)."""

NOT_UTF8 = "CAST(X'70FF71' AS TEXT)"
"""`p`, a byte no UTF-8 text holds, `q`: kept by SQLite as text, which no reader can take as
text, so either centre holds its run back (a SQLite centre would keep the bytes)."""


def spoilt(kind: str, dest: str) -> tuple[str, str, str, str]:
    """(table, column, SQL, what the problem says) of a value of `kind` `dest` cannot hold."""
    if kind == "of its type":
        table, column, value = value_for(dest)
        return table, column, value, "NUL" if value == NUL else "text"
    table, column = ("steps", "result") if kind == "not UTF-8 in a step" else ("runs", "goal")
    return table, column, NOT_UTF8, "not UTF-8"


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_the_centre_cannot_hold_is_quarantined_and_the_rest_flows(
    store_target: str, new_store: NewStore, tmp_path: Path, kind: str
) -> None:
    new_store.place(store_target)  # a centre already made (see the module)
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    roots = write_source(host, runs=3, tag="h")
    write_source(other, runs=1, tag="o")
    table, column, value, said = spoilt(kind, store_target)
    bad = roots[1]
    row = spoil(host, table, column, value, bad)

    report = sync([host, other], store_target)

    entries = {q.run: q for q in quarantined(store_target)}
    assert set(entries) == {bad, bad + 1}  # its child waits with it
    held = entries[bad]
    assert (held.run, held.table, held.row, held.column) == (bad, table, f"id={row}", column)
    assert said in held.problem
    assert held.source == str(host.resolve())
    assert held_rows(held) == raw_rows(host, bad)  # byte-exact
    origin = report.origins[0]
    assert [q.run for q in origin.quarantined] == [bad, bad + 1]
    assert f"quarantined run {bad}: {table}.{column}" in "\n".join(report.describe())
    goals = central_runs(store_target)
    assert "goal h1" not in goals and "child h1" not in goals
    assert {"goal h0", "goal h2", "goal o0", "child h0", "child h2"} <= set(goals)
    assert sync([host, other], store_target).rows == 0  # held, not sent, not doubled
    assert len(quarantined(store_target)) == 2

    repair(host, table, column, row)
    again = sync([host, other], store_target)
    assert again.origins[0].released == (bad, bad + 1)
    assert quarantined(store_target) == []
    assert mirror_problems(store_target, host) == []
    assert mirror_problems(store_target, other) == []
    assert sync([host, other], store_target).rows == 0


def test_a_run_already_central_keeps_its_rows_while_its_new_ones_wait(
    pg_url: str, new_store: NewStore, tmp_path: Path
) -> None:
    new_store.place(pg_url)  # a centre already made (see the module)
    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=2, tag="h")
    sync([host], pg_url)
    with Store.open(host) as store:  # the run goes on; one of its new steps holds a NUL
        store.checkpoint_steps(roots[1], [StepRecord.new(9, "late", "ok").with_trace("p", "t", 9)])
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(f"UPDATE steps SET result = {NUL} WHERE run_id = ? AND step = 9", [roots[1]])
    sync([host], pg_url)
    # its child, central too, links to the run as last sent: it need not wait
    assert [q.run for q in quarantined(pg_url)] == [roots[1]]
    assert "goal h1" in central_runs(pg_url)  # as it was last sent
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute("UPDATE steps SET result = 'fine' WHERE step = 9")
    sync([host], pg_url)
    assert quarantined(pg_url) == []
    assert mirror_problems(pg_url, host) == []


def test_a_child_of_a_quarantined_run_waits_with_it(
    pg_url: str, new_store: NewStore, tmp_path: Path
) -> None:
    new_store.place(pg_url)  # a centre already made (see the module)
    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=2, tag="h")
    row = spoil(host, "steps", "result", NUL, roots[0])
    sync([host], pg_url)
    held = {q.run: q for q in quarantined(pg_url)}
    child = roots[0] + 1
    assert set(held) == {roots[0], child}
    assert f"run {roots[0]}" in held[child].problem
    assert "child h0" not in central_runs(pg_url)
    repair(host, "steps", "result", row)
    sync([host], pg_url)
    assert quarantined(pg_url) == []
    assert mirror_problems(pg_url, host) == []


@pytest.mark.parametrize(("value", "said"), [(NUL, "NUL"), (NOT_UTF8, "not UTF-8")])
def test_a_session_value_still_refuses_its_source_by_name(
    store_target: str, new_store: NewStore, tmp_path: Path, value: str, said: str
) -> None:
    """A value in a session's row (no run's) refuses its source by table, row and column
    where the centre cannot hold it (a SQLite centre holds a NUL as it is)."""
    new_store.place(store_target)  # a centre already made (see the module)
    from support.synccheck import add_session

    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=1)
    session = add_session(host, roots)
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(f"UPDATE sessions SET root = {value} WHERE id = ?", [session])
    if value == NUL and "://" not in store_target:
        sync([host], store_target)
    else:
        with pytest.raises(SyncRefusedError) as refused:
            sync([host], store_target)
        named = str(refused.value.refused[0].error)
        assert f"sessions.root of the row id={session}" in named and said in named
    assert quarantined(store_target) == []


def test_the_command_and_check_name_the_quarantined_run(
    pg_url: str, new_store: NewStore, tmp_path: Path
) -> None:
    new_store.place(pg_url)  # a centre already made (see the module)
    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=2, tag="h")
    row = spoil(host, "steps", "result", NUL, roots[1])
    done = run_in_process("sync", host, pg_url)
    assert done.returncode == 0, done.stderr
    assert f"quarantined run {roots[1]}" in done.stdout and "steps.result" in done.stdout
    checked = run_in_process("check", pg_url, "--json")
    assert checked.returncode == 6, checked.stdout
    findings = [f for f in json.loads(checked.stdout)["findings"] if f["kind"] == "quarantined"]
    assert [f["rows"] for f in findings] == [[roots[1]], [roots[1] + 1]]  # and its child
    finding = findings[0]
    said = json.dumps(finding)
    assert str(host.resolve()) in said and "steps.result" in said and f"id={row}" in said
    repair(host, "steps", "result", row)
    assert run_in_process("sync", host, pg_url).returncode == 0
    assert run_in_process("check", pg_url).returncode == 0


def test_a_centre_synced_before_the_quarantine_gets_its_table(
    pg_url: str, new_store: NewStore, tmp_path: Path
) -> None:
    new_store.place(pg_url)  # a centre already made (see the module)
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    write_source(other, runs=1, tag="o")
    sync([other], pg_url)
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE hs_sync_quarantine"))
    engine.dispose()
    roots = write_source(host, runs=2, tag="h")
    spoil(host, "steps", "result", NUL, roots[1])
    sync([host, other], pg_url)
    assert [q.run for q in quarantined(pg_url)] == [roots[1], roots[1] + 1]


@pytest.mark.parametrize(
    ("table", "column", "value", "bad"),
    [("runs", "parent_run_id", TEXT, 1), ("steps", "result", NOT_UTF8, 2)],
    ids=["text-for-a-run-id", "not-utf8"],
)
def test_a_quarantine_written_in_slices_sends_the_run_once(
    tmp_path: Path, table: str, column: str, value: str, bad: int
) -> None:
    """Into a SQLite centre a pass commits slices of `batch_size` rows: a run held, then
    released, arrives whole and once however its rows fall into slices."""
    host, centre = tmp_path / "host.sqlite3", str(tmp_path / "centre.sqlite3")
    roots = write_source(host, runs=3, steps=7, tag="h")
    row = spoil(host, table, column, value, roots[bad])
    family = (roots[bad], roots[bad] + 1)
    report = sync([host], centre, batch_size=2)
    assert tuple(q.run for q in report.origins[0].quarantined) == family
    assert f"goal h{bad}" not in central_runs(centre)
    assert {f"goal h{n}" for n in range(3) if n != bad} <= set(central_runs(centre))
    assert sync([host], centre, batch_size=2).rows == 0
    repair(host, table, column, row)
    assert sync([host], centre, batch_size=2).origins[0].released == family
    assert quarantined(centre) == []
    assert mirror_problems(centre, host) == []
    assert sync([host], centre, batch_size=2).rows == 0


def test_an_origin_retired_for_a_new_store_at_its_file_takes_its_quarantine_along(
    store_target: str, new_store: NewStore, tmp_path: Path
) -> None:
    """A new store written over an origin's file (the same inode, another first run) is a new
    origin and the old one is retired: its held runs, which no sync will ever release, are
    deleted with it (they were left behind, named by `check` under the file's path)."""
    new_store.place(store_target)  # a centre already made (see the module)
    host, fresh = tmp_path / "host.sqlite3", tmp_path / "fresh.sqlite3"
    roots = write_source(host, runs=2, tag="h")
    table, column, value = value_for(store_target)
    spoil(host, table, column, value, roots[1])
    sync([host], store_target)
    assert [q.run for q in quarantined(store_target)] == [roots[1], roots[1] + 1]
    write_source(fresh, runs=1, tag="n")
    inode = host.stat().st_ino
    shutil.copyfile(fresh, host)  # written into the same file: its inode stays
    assert host.stat().st_ino == inode

    report = sync([host], store_target)

    assert report.origins[0].new_origin
    assert len(list_origins(store_target)) == 2
    assert quarantined(store_target) == []
    assert "goal n0" in central_runs(store_target) and "goal h0" in central_runs(store_target)


def test_a_run_whose_event_names_a_quarantined_run_waits_with_it(
    store_target: str, new_store: NewStore, tmp_path: Path
) -> None:
    """A stored event's JSON names runs (`run_id`, `child_run_id`), which sync gives their
    central ids as it does a row's links: a run whose event names a held run waits with it,
    or the event would keep the source's id (another run's, centrally) for good."""
    new_store.place(store_target)  # a centre already made (see the module)
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    write_source(other, runs=2, tag="o")
    sync([other], store_target)  # the centre's ids are not the host's
    roots = write_source(host, runs=2, tag="h")
    with Store.open(host) as store:
        store.put_event(RunEvent.new(roots[0], 1, "spawned", child_run_id=roots[1]))
    table, column, value = value_for(store_target)
    row = spoil(host, table, column, value, roots[1])

    sync([host], store_target)

    held = {q.run: q for q in quarantined(store_target)}
    assert roots[0] in held and f"run {roots[1]}" in held[roots[0]].problem
    assert "goal h0" not in central_runs(store_target)
    repair(host, table, column, row)
    sync([host], store_target)
    assert quarantined(store_target) == []
    engine = create_engine(store_target if "://" in store_target else f"sqlite:///{store_target}")
    try:
        with engine.connect() as conn:
            named = conn.execute(
                text(
                    "SELECT e.json FROM run_events e JOIN runs r ON r.id = e.run_id"
                    " WHERE r.goal = 'goal h0' AND e.kind = 'spawned'"
                )
            ).scalar_one()
            child = conn.execute(text("SELECT id FROM runs WHERE goal = 'goal h1'")).scalar_one()
    finally:
        engine.dispose()
    assert json.loads(named)["child_run_id"] == child
