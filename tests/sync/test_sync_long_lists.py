"""Sync's lists of ids are sent in chunks: a pass that deletes or sends again more runs than
a statement may name (PostgreSQL takes at most 65,535 parameters) still goes through."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.big_stores import runs_store
from support.synccheck import mirror_problems

from harness_store.sync import sync

RUNS = 70_000
"""More runs than PostgreSQL's 65,535 parameters of one statement: the least that shows it."""


@pytest.mark.slow
def test_more_runs_deleted_in_the_source_than_a_statement_may_name(
    pg_url: str, tmp_path: Path
) -> None:
    source = runs_store(tmp_path / "host.sqlite3", RUNS)
    sync([source], pg_url)
    with closing(sqlite3.connect(source)) as conn, conn:  # a prune, as upstream deletes
        conn.execute("DELETE FROM steps WHERE run_id > 10")
        conn.execute("DELETE FROM session_turns WHERE run_id > 10")
        conn.execute("DELETE FROM runs WHERE id > 10")
    report = sync([source], pg_url)
    assert report.origins[0].counts.deleted["runs"] == RUNS - 10
    assert report.origins[0].counts.deleted["steps"] == RUNS - 10
    assert mirror_problems(pg_url, source) == []
