"""A sync pass costs what changed, not the source's size: a big state table is read in part
(the rows of runs new, unfinished or changed, the rows above its key high-water mark, and a
window of keys compared in full), so a pass over a source four times bigger reads about as
much; and no change is missed: a row of a live run arrives at the next pass, one of a
finished run (an archive, a deletion, a foreign writer's update) once the window reaches it,
within `SCRUB_PASSES` passes and sooner on a small table."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool
from support.big_stores import runs_store
from support.clirun import peak_rss_kib
from support.pg_proxy import PgProxy
from support.synccheck import mirror_problems

from harness_store.sync import sync
from harness_store.sync.finding import SCRUB_PASSES, SCRUB_ROWS


@contextmanager
def source_steps(source: Path) -> Iterator[list[int]]:
    """SQLite's virtual machine steps (in hundreds) run on connections to the file `source`
    while the body runs: what a pass reads of the source, whatever reads it, but the check
    of its pages (`PRAGMA quick_check`, which reads the whole file by design: a pass makes
    it at most every `PAGE_CHECK_EVERY` seconds an origin, `test_sync_page_checks.py`)."""
    counted = [0]
    resolved = str(source.resolve())
    checking = [False]

    def tick() -> int:
        counted[0] += 0 if checking[0] else 1
        return 0

    def statement(sql: str) -> None:
        checking[0] = sql.lstrip().upper().startswith("PRAGMA QUICK_CHECK")

    def watch(raw: Any, *_: Any) -> None:
        if not isinstance(raw, sqlite3.Connection):
            return
        files = [str(r[2]) for r in raw.execute("PRAGMA database_list")]
        if resolved in files:
            raw.set_progress_handler(tick, 100)
            raw.set_trace_callback(statement)

    event.listen(Pool, "connect", watch)
    event.listen(Pool, "checkout", watch)
    try:
        yield counted
    finally:
        event.remove(Pool, "connect", watch)
        event.remove(Pool, "checkout", watch)


def add_run(path: Path, *, status: str = "completed") -> int:
    """One new run with a step and a pending approval, written as io-harness writes them."""
    with closing(sqlite3.connect(path)) as conn, conn:
        run = conn.execute(
            "INSERT INTO runs (goal, file, depth, status, started_at) "
            "VALUES ('one more', 'src/x.rs', 0, ?, '2026-01-01T00:00:00.000Z')",
            (status,),
        ).lastrowid
        conn.execute(
            "INSERT INTO steps (run_id, step, decision, result) VALUES (?, 1, 'd', 'ok')", (run,)
        )
        conn.execute(
            "INSERT INTO pending_approvals (run_id, step, act, target) "
            "VALUES (?, 1, 'write', 'a.rs')",
            (run,),
        )
    assert run is not None
    return run


def widened(path: Path, runs: int, *, turns: bool = True) -> Path:
    """`runs_store` with an approval, an outcome and (`turns`) a session turn for every run, so
    those state tables are big too (read in part)."""
    runs_store(path, runs)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO pending_approvals (run_id, step, act, target, resolved) "
            "SELECT id, 1, 'write', 'a.rs', 'approved' FROM runs"
        )
        conn.execute(
            "INSERT INTO run_outcomes (run_id, outcome, success, steps, tokens, finished_at) "
            "SELECT id, 'success', 1, 1, 5, '2025-06-01T00:00:01.000Z' FROM runs"
        )
        if turns:
            conn.execute(
                "INSERT INTO session_turns "
                "(session_id, run_id, prompt, reply, outcome, created_at) "
                "SELECT 1, id, 'p', 'r', 'success', '2025-06-01T00:00:00.000Z' FROM runs "
                "WHERE id % 10 != 1"
            )
    return path


def write(path: Path, sql: str, *params: Any) -> None:
    """A statement as a foreign writer (or upstream) runs it on the source."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, params)


@pytest.mark.slow_on("postgresql")
def test_a_one_run_pass_reads_as_much_of_a_source_four_times_bigger(
    tmp_path: Path, store_target: str
) -> None:
    steps = {}
    for runs in (4_000, 16_000):
        source = runs_store(tmp_path / f"host-{runs}.sqlite3", runs)
        add_run(source)
        # PostgreSQL: one centre, the second source its second origin
        alone = runs == 4_000 or store_target.startswith("postgresql")
        centre = store_target if alone else str(tmp_path / "centre-big.sqlite3")
        sync([source], centre)  # the first pass: sent whole
        add_run(source)
        sync([source], centre)  # every big table's key high-water mark known
        add_run(source)
        with source_steps(source) as counted:
            sync([source], centre)
        steps[runs] = counted[0]
        assert mirror_problems(centre, source) == []
    # the old pass read every state table whole: four times the rows, four times the steps
    assert steps[16_000] <= 1.5 * steps[4_000], steps


def test_a_one_run_pass_sends_as_many_statements_for_a_source_four_times_bigger(
    pg_url: str, tmp_path: Path
) -> None:
    """What a one-run pass sends the centre does not grow with the source: the counts, the
    window's entries and the one run's rows, as many statements and round trips for either.
    Only the pass counted goes through the proxy; the passes before it, the whole source's
    rows among them, go straight to the server, as they would from another process."""
    proxy = PgProxy(pg_url)
    sent: dict[int, tuple[int, int]] = {}
    try:
        for runs in (1_500, 6_000):
            source = widened(tmp_path / f"host-{runs}.sqlite3", runs)
            sync([source], pg_url)
            add_run(source)
            sync([source], pg_url)  # every big table's marks known
            add_run(source)
            sync([source], pg_url)  # its pages checked a moment ago: not again
            add_run(source)
            with proxy.counting() as messages:
                sync([source], proxy.url)
                sent[runs] = (proxy.statements(messages), messages[b"S"])
            assert mirror_problems(pg_url, source) == []
    finally:
        proxy.close()
    assert sent[6_000] == sent[1_500], sent


def test_a_live_runs_rows_changed_in_place_arrive_at_the_next_pass(
    tmp_path: Path, store_target: str
) -> None:
    source = widened(tmp_path / "host.sqlite3", 3 * SCRUB_ROWS)
    live = add_run(source, status="running")
    waiting = add_run(source, status="paused")
    sync([source], store_target)
    add_run(source)
    sync([source], store_target)
    # as upstream's `finish_run`, a lease renewed, an approval resolved
    write(source, "UPDATE runs SET outcome = 'success', status = 'completed' WHERE id = ?", live)
    write(source, "UPDATE pending_approvals SET resolved = 'approved' WHERE run_id = ?", live)
    write(
        source,
        "INSERT INTO run_outcomes (run_id, outcome, success, steps, tokens, finished_at) "
        "VALUES (?, 'success', 1, 1, 0, '2026-01-01T00:00:01.000Z')",
        live,
    )
    # a row of a paused run deleted (as a consumed queue entry or a released lease is)
    write(source, "DELETE FROM pending_approvals WHERE run_id = ?", waiting)
    sync([source], store_target)
    assert mirror_problems(store_target, source) == []


def test_a_finished_runs_rows_changed_by_another_writer_arrive_within_the_window(
    tmp_path: Path, store_target: str
) -> None:
    runs = 3 * SCRUB_ROWS
    source = widened(tmp_path / "host.sqlite3", runs)
    sync([source], store_target)
    add_run(source)
    sync([source], store_target)
    # old, finished rows: an archive empties a run's texts, a repair rewrites an outcome,
    # a session turn's reply changes, and runs are deleted (a prune)
    write(source, "UPDATE runs SET goal = '' WHERE id IN (7, ?)", runs - 3)
    write(source, "UPDATE runs SET status = 'failed' WHERE id = 11")
    write(source, "UPDATE session_turns SET reply = 'edited' WHERE run_id = 21")
    write(source, "UPDATE pending_approvals SET resolved = 'denied' WHERE run_id = ?", runs - 1)
    write(source, "DELETE FROM run_outcomes WHERE run_id IN (31, ?)", runs - 9)
    write(source, "DELETE FROM pending_approvals WHERE run_id IN (31, ?)", runs - 9)
    write(source, "DELETE FROM steps WHERE run_id IN (31, ?)", runs - 9)
    write(source, "DELETE FROM session_turns WHERE run_id IN (31, ?)", runs - 9)
    write(source, "DELETE FROM runs WHERE id IN (31, ?)", runs - 9)
    passes = 0
    bound = -(-runs // max(SCRUB_ROWS, runs // SCRUB_PASSES)) + 1  # the window's round
    while mirror_problems(store_target, source) and passes < bound:
        sync([source], store_target)
        passes += 1
    assert mirror_problems(store_target, source) == []
    assert 0 < passes <= bound


def test_rows_deleted_in_the_source_leave_the_centre_at_the_next_pass(
    tmp_path: Path, store_target: str
) -> None:
    """A prune of finished runs away from the window: the row counts differ from the id
    map's, so the next pass compares those tables whole and deletes every one centrally."""
    runs = 3 * SCRUB_ROWS
    source = widened(tmp_path / "host.sqlite3", runs)
    sync([source], store_target)
    add_run(source)
    sync([source], store_target)  # read in part: the window now past the first keys
    doomed = [*range(100, 150), *range(runs - 300, runs - 200)]
    marks = ",".join("?" * len(doomed))
    for table, column in (
        ("run_outcomes", "run_id"),
        ("pending_approvals", "run_id"),
        ("steps", "run_id"),
        ("session_turns", "run_id"),
        ("runs", "id"),
    ):
        write(source, f"DELETE FROM {table} WHERE {column} IN ({marks})", *doomed)
    report = sync([source], store_target)
    assert mirror_problems(store_target, source) == []
    assert report.origins[0].counts.deleted["runs"] == len(doomed)
    assert report.origins[0].counts.deleted["run_outcomes"] == len(doomed)


def test_a_deletion_and_an_insert_between_passes_are_both_seen(
    tmp_path: Path, store_target: str
) -> None:
    """Rows deleted and as many inserted leave the table's count as it was: the inserted
    rows are above the highest key read (ids are not reused), so the rows at or below it
    still count fewer than the id map, and the deletion is seen at the next pass."""
    runs = 3 * SCRUB_ROWS
    source = widened(tmp_path / "host.sqlite3", runs)
    sync([source], store_target)
    add_run(source)
    sync([source], store_target)
    write(source, "DELETE FROM pending_approvals WHERE run_id IN (120, ?)", runs - 250)
    add_run(source)
    add_run(source)
    sync([source], store_target)
    assert mirror_problems(store_target, source) == []


GROWTH_KIB = 16 * 1024
"""What 200,000 more runs may add to a one-run pass's peak (the whole state tables and the id
maps of runs and turns held, as before, added well over 100 MiB)."""


@pytest.mark.slow
def test_a_one_run_passs_memory_does_not_grow_with_the_source(tmp_path: Path) -> None:
    peaks = {}
    for runs in (50_000, 250_000):
        source = runs_store(tmp_path / f"{runs}.sqlite3", runs)
        centre = tmp_path / f"centre-{runs}.sqlite3"
        sync([source], centre)
        add_run(source)
        sync([source], centre)
        add_run(source)
        peaks[runs] = peak_rss_kib("sync", source, centre)
    assert peaks[250_000] - peaks[50_000] < GROWTH_KIB, peaks


@pytest.mark.timeout(120)
def test_a_finished_runs_new_step_arrives_at_the_next_pass(
    tmp_path: Path, store_target: str
) -> None:
    """An appended row of a run whose own row did not change names a run the pass never
    read: its central id is asked of the centre while the rows stream (on PostgreSQL
    inside the COPY), and the pass still ends."""
    source = widened(tmp_path / "host.sqlite3", 3 * SCRUB_ROWS)
    done = add_run(source)
    sync([source], store_target)
    write(
        source,
        "INSERT INTO steps (run_id, step, decision, result) VALUES (?, 2, 'd', 'ok')",
        done,
    )
    sync([source], store_target)
    assert mirror_problems(store_target, source) == []
