"""A pass over a source one of whose runs the centre holds back costs what a clean pass
costs when nothing changed: it does not compare the origin's rows with their id maps again,
nor encode and write the held run's rows into the quarantine again. The run is still named in
every pass's report, and sent whole once its source is repaired."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from support.big_stores import runs_store
from support.synccheck import mirror_problems, write_source

from harness_store.sync import quarantined, sync

NUL = "'a' || char(0) || 'b'"


def spoil(path: Path, dest: str, run: int) -> tuple[str, str, int]:
    """Write into run `run`'s first row a value `dest` cannot hold (a NUL in a step's text on
    PostgreSQL; text where a run's parent id belongs on SQLite, which no sync can link); the
    table, column and row id."""
    table, column, value = (
        ("steps", "result", NUL) if "://" in dest else ("runs", "parent_run_id", "'abc'")
    )
    key = "id" if table == "runs" else "run_id"
    with closing(sqlite3.connect(path)) as conn, conn:
        (row,) = conn.execute(f"SELECT min(id) FROM {table} WHERE {key} = ?", [run]).fetchone()
        conn.execute(f"UPDATE {table} SET {column} = {value} WHERE id = ?", [row])
    return table, column, int(row)


def repair(path: Path, table: str, column: str, row: int) -> None:
    value = "NULL" if column == "parent_run_id" else "'repaired'"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE {table} SET {column} = {value} WHERE id = ?", [row])


def test_a_held_run_that_did_not_change_is_not_written_again(
    store_target: str, tmp_path: Path
) -> None:
    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=3, tag="h")
    table, column, row = spoil(host, store_target, roots[1])
    family = [roots[1], roots[1] + 1]  # its child waits with it
    sync([host], store_target)
    kept = {q.run: (q.last_seen, q.raw, q.problem) for q in quarantined(store_target)}
    assert sorted(kept) == family

    for _ in range(2):
        again = sync([host], store_target)
        assert again.rows == 0
        held = again.origins[0].quarantined
        assert [(q.run, q.new) for q in held] == [(r, False) for r in family]  # still named
        assert (held[0].table, held[0].column, held[0].row) == (table, column, f"id={row}")
        assert f"quarantined run {roots[1]}: {table}.{column}" in "\n".join(again.describe())
        # the quarantine's rows as the first pass wrote them: not encoded and written again
        now = {q.run: (q.last_seen, q.raw, q.problem) for q in quarantined(store_target)}
        assert now == kept

    repair(host, table, column, row)
    assert list(sync([host], store_target).origins[0].released) == family
    assert quarantined(store_target) == []
    assert mirror_problems(store_target, host) == []
    assert sync([host], store_target).rows == 0


def test_a_run_held_by_an_earlier_release_stays_held_and_is_then_left_alone(
    store_target: str, tmp_path: Path
) -> None:
    """Marks an earlier release left (the runs table marked held, no run's fingerprint): the
    next pass looks at the held runs in full, as that release did, and marks them; the pass
    after it finds them unchanged."""
    host = tmp_path / "host.sqlite3"
    roots = write_source(host, runs=3, tag="h")
    table, column, row = spoil(host, store_target, roots[1])
    family = [roots[1], roots[1] + 1]
    sync([host], store_target)
    engine = create_engine(store_target if "://" in store_target else f"sqlite:///{store_target}")
    try:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM hs_sync_marks WHERE tbl LIKE '?%'"))
            conn.execute(text("UPDATE hs_sync_marks SET hwm = 0 WHERE tbl = '#runs'"))
    finally:
        engine.dispose()
    again = sync([host], store_target)
    assert again.rows == 0
    assert [q.run for q in again.origins[0].quarantined] == family
    kept = {q.run: (q.last_seen, q.raw) for q in quarantined(store_target)}
    assert sync([host], store_target).rows == 0
    assert {q.run: (q.last_seen, q.raw) for q in quarantined(store_target)} == kept
    repair(host, table, column, row)
    assert list(sync([host], store_target).origins[0].released) == family
    assert mirror_problems(store_target, host) == []


@contextmanager
def centre_traffic() -> Iterator[dict[str, int]]:
    """What PostgreSQL connections run during the body: statements that read
    (`selects`), the rows those return (`rows`), and statements that write (`writes`)."""
    seen = {"selects": 0, "rows": 0, "writes": 0}

    def count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if conn.dialect.name != "postgresql":
            return
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            seen["selects"] += 1
            seen["rows"] += max(cursor.rowcount, 0)
        else:
            seen["writes"] += 1

    event.listen(Engine, "after_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(Engine, "after_cursor_execute", count)


def unchanged_pass(pg_url: str, source: Path) -> dict[str, int]:
    """The centre traffic of a pass over `source` after it was synced (nothing changed)."""
    sync([source], pg_url)
    sync([source], pg_url)
    with centre_traffic() as seen:
        assert sync([source], pg_url).rows == 0
    return seen


def test_an_unchanged_pass_with_a_held_run_costs_a_clean_one_whatever_the_runs(
    pg_url: str, tmp_path: Path
) -> None:
    """Into PostgreSQL, the unchanged pass over a source that holds a run back reads of the
    centre what the same pass over a clean source reads, but the held run's entry and mark
    (one statement, two rows), and writes no more (nothing of the quarantine), for few runs
    as for four times as many."""
    for runs in (150, 600):
        clean, held = tmp_path / f"clean{runs}.sqlite3", tmp_path / f"held{runs}.sqlite3"
        runs_store(clean, runs)
        runs_store(held, runs)
        spoil(held, pg_url, 7)
        plain, holding = unchanged_pass(pg_url, clean), unchanged_pass(pg_url, held)
        assert [q.run for q in quarantined(pg_url) if q.source == str(held.resolve())] == [7]
        seen = {"clean": plain, "held": holding, "runs": runs}
        assert holding["selects"] <= plain["selects"] + 1, seen
        assert holding["rows"] <= plain["rows"] + 2, seen
        assert holding["writes"] <= plain["writes"], seen
