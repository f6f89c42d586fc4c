"""A run holding a value the centre cannot hold as it is does not stop its host's other runs:
the whole run is quarantined centrally (its rows' raw values, byte-exact), named in the sync
report, in `check` of the centre and in the command's output, and sent whole, once, when its
source is repaired. Values are written with `sqlite3` directly, as a foreign writer would."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.clirun import run_in_process
from support.synccheck import mirror_problems, write_source

from harness_store import StepRecord, Store
from harness_store.sync import SyncRefusedError, quarantined, sync

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


def test_a_run_the_centre_cannot_hold_is_quarantined_and_the_rest_flows(
    store_target: str, tmp_path: Path
) -> None:
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    roots = write_source(host, runs=3, tag="h")
    write_source(other, runs=1, tag="o")
    table, column, value = value_for(store_target)
    bad = roots[1]
    row = spoil(host, table, column, value, bad)

    report = sync([host, other], store_target)

    entries = {q.run: q for q in quarantined(store_target)}
    assert set(entries) == {bad, bad + 1}  # its child waits with it
    held = entries[bad]
    assert (held.run, held.table, held.row, held.column) == (bad, table, f"id={row}", column)
    assert held.source == str(host.resolve())
    assert held_rows(held) == raw_rows(host, bad)  # byte-exact
    origin = report.origins[0]
    assert [q.run for q in origin.quarantined] == [bad, bad + 1]
    assert f"quarantined run {bad}: {table}.{column}" in "\n".join(report.describe())
    goals = central_runs(store_target)
    assert "goal h1" not in goals and "child h1" not in goals
    assert {"goal h0", "goal h2", "goal o0", "child h0", "child h2"} <= set(goals)
    assert sync([host, other], store_target).rows == 0  # held, not sent, not doubled

    repair(host, table, column, row)
    again = sync([host, other], store_target)
    assert again.origins[0].released == (bad, bad + 1)
    assert quarantined(store_target) == []
    assert mirror_problems(store_target, host) == []
    assert mirror_problems(store_target, other) == []
    assert sync([host, other], store_target).rows == 0


def test_a_run_already_central_keeps_its_rows_while_its_new_ones_wait(
    pg_url: str, tmp_path: Path
) -> None:
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


def test_a_child_of_a_quarantined_run_waits_with_it(pg_url: str, tmp_path: Path) -> None:
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


def test_a_session_value_still_refuses_its_source_by_name(pg_url: str, tmp_path: Path) -> None:
    from support.synccheck import add_session

    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=1)
    session = add_session(host, roots)
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(f"UPDATE sessions SET root = {NUL} WHERE id = ?", [session])
    with pytest.raises(SyncRefusedError) as refused:
        sync([host], pg_url)
    assert "sessions.root" in str(refused.value.refused[0].error)
    assert quarantined(pg_url) == []


def test_the_command_and_check_name_the_quarantined_run(pg_url: str, tmp_path: Path) -> None:
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


def test_a_centre_synced_before_the_quarantine_gets_its_table(pg_url: str, tmp_path: Path) -> None:
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


def test_a_quarantine_written_in_slices_sends_the_run_once(tmp_path: Path) -> None:
    """Into a SQLite centre a pass commits slices of `batch_size` rows: a run held, then
    released, arrives whole and once however its rows fall into slices."""
    host, centre = tmp_path / "host.sqlite3", str(tmp_path / "centre.sqlite3")
    roots = write_source(host, runs=3, steps=7, tag="h")
    row = spoil(host, "runs", "parent_run_id", TEXT, roots[1])
    report = sync([host], centre, batch_size=2)
    assert [q.run for q in report.origins[0].quarantined] == [roots[1], roots[1] + 1]
    assert "goal h1" not in central_runs(centre)
    assert {"goal h0", "goal h2"} <= set(central_runs(centre))
    repair(host, "runs", "parent_run_id", row)
    assert sync([host], centre, batch_size=2).origins[0].released == (roots[1], roots[1] + 1)
    assert quarantined(centre) == []
    assert mirror_problems(centre, host) == []
    assert sync([host], centre, batch_size=2).rows == 0
