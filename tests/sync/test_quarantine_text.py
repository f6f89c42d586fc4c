"""A run holding a text whose bytes are not UTF-8 (which SQLite keeps, and no reader can
take as text) does not stop its host's other runs: it is quarantined byte-exact like a run
holding a NUL, named by table, row and column, and sent whole, once, when repaired. Into
either centre: a SQLite centre keeps any bytes, but no read of it could take the text back.
Values are written with `sqlite3` directly, as a foreign writer would."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.synccheck import mirror_problems, write_source

from harness_store.sync import SyncRefusedError, quarantined, sync
from sync.test_follow import Follower, caught_up, reaped
from sync.test_quarantine import central_runs, held_rows, raw_rows, repair, spoil
from sync.test_quarantine_follow import a_run

__all__ = ["reaped"]  # the processes a test started are killed after it

NOT_UTF8 = "CAST(X'70FF71' AS TEXT)"
"""`p`, a byte no UTF-8 text holds, `q`: kept by SQLite as text."""


@pytest.mark.parametrize(("table", "column"), [("steps", "result"), ("runs", "goal")])
def test_a_run_holding_text_not_utf8_is_quarantined_and_the_rest_flows(
    store_target: str, tmp_path: Path, table: str, column: str
) -> None:
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    roots = write_source(host, runs=3, tag="h")
    write_source(other, runs=1, tag="o")
    bad = roots[1]
    row = spoil(host, table, column, NOT_UTF8, bad)

    report = sync([host, other], store_target)

    entries = {q.run: q for q in quarantined(store_target)}
    assert set(entries) == {bad, bad + 1}  # its child waits with it
    held = entries[bad]
    assert (held.run, held.table, held.row, held.column) == (bad, table, f"id={row}", column)
    assert "not UTF-8" in held.problem
    assert held_rows(held) == raw_rows(host, bad)  # byte-exact
    assert f"quarantined run {bad}: {table}.{column}" in "\n".join(report.describe())
    goals = central_runs(store_target)
    assert "child h1" not in goals and "goal h1" not in goals
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


def test_a_run_holding_text_not_utf8_in_slices_arrives_once(tmp_path: Path) -> None:
    """Into a SQLite centre in slices of two rows: held, then released, whole and once."""
    host, centre = tmp_path / "host.sqlite3", str(tmp_path / "centre.sqlite3")
    roots = write_source(host, runs=3, steps=7, tag="h")
    row = spoil(host, "steps", "result", NOT_UTF8, roots[2])
    report = sync([host], centre, batch_size=2)
    assert [q.run for q in report.origins[0].quarantined] == [roots[2], roots[2] + 1]
    assert "goal h2" not in central_runs(centre)
    assert sync([host], centre, batch_size=2).rows == 0
    repair(host, "steps", "result", row)
    assert sync([host], centre, batch_size=2).origins[0].released == (roots[2], roots[2] + 1)
    assert quarantined(centre) == []
    assert mirror_problems(centre, host) == []


def test_text_not_utf8_in_a_session_refuses_by_table_row_and_column(
    store_target: str, tmp_path: Path
) -> None:
    from support.synccheck import add_session

    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=1)
    session = add_session(host, roots)
    with closing(sqlite3.connect(host)) as conn, conn:
        conn.execute(f"UPDATE sessions SET root = {NOT_UTF8} WHERE id = ?", [session])
    with pytest.raises(SyncRefusedError) as refused:
        sync([host], store_target)
    said = str(refused.value.refused[0].error)
    assert f"sessions.root of the row id={session}" in said and "not UTF-8" in said
    assert quarantined(store_target) == []


@pytest.mark.slow
def test_a_fleet_keeps_flowing_past_a_run_holding_text_not_utf8(
    pg_url: str, tmp_path: Path
) -> None:
    clean, spoilt = tmp_path / "clean.sqlite3", tmp_path / "spoilt.sqlite3"
    write_source(clean, runs=2, tag="c")
    roots = write_source(spoilt, runs=2, tag="s")
    row = spoil(spoilt, "runs", "goal", NOT_UTF8, roots[0])
    family = [roots[0], roots[0] + 1]
    follower = Follower([clean, spoilt], pg_url)

    caught_up(pg_url, clean)
    named = follower.wait(
        lambda e: e["event"] == "pass" and e["source"] == str(spoilt) and e["quarantined"]
    )
    assert [q["run"] for q in named["quarantined"]] == family
    assert (named["quarantined"][0]["table"], named["quarantined"][0]["column"]) == (
        "runs",
        "goal",
    )
    assert named["quarantined"][0]["row"] == f"id={row}"
    assert "not UTF-8" in named["quarantined"][0]["problem"]
    held = {q.run: q for q in quarantined(pg_url)}
    assert sorted(held) == family
    assert held_rows(held[roots[0]]) == raw_rows(spoilt, roots[0])  # byte-exact

    a_run(clean, "late clean")
    caught_up(pg_url, clean)
    a_run(spoilt, "late spoilt")  # the spoilt host's other runs flow; named only once
    later = follower.wait(
        lambda e: e["event"] == "pass" and e["source"] == str(spoilt) and e["rows"] > 0
    )
    assert later["quarantined"] == []

    repair(spoilt, "runs", "goal", row)
    released = follower.wait(
        lambda e: e["event"] == "pass" and e["source"] == str(spoilt) and e["released"]
    )
    assert released["released"] == family
    caught_up(pg_url, spoilt)  # whole, and nothing twice
    assert quarantined(pg_url) == []
    assert follower.stop() == 0, follower.worker.stderr
    assert follower.events("refused") + follower.events("retrying") == []
