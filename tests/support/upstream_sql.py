"""io-harness 0.13's own SQL, as facts, to read back what harness_store wrote.

Each statement is the one upstream's `Store` runs (`src/state.rs` at `v0.13.0`), with its
numbered parameters written as `?` in the same order. They are run here on a connection of our
own — plain `sqlite3` on a file store, plain `psycopg` on PostgreSQL — so what the tests read
back never goes through harness_store. Standard library (and psycopg) only.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

# --- reads, by upstream method name -------------------------------------------------------

READS: dict[str, str] = {
    "events": "SELECT step, kind, act, target, rule, layer, decision, source, performed "
    "FROM policy_events WHERE run_id = ? ORDER BY id ASC",
    "pending": "SELECT id, run_id, step, act, target, content, resolved "
    "FROM pending_approvals WHERE id = ?",
    "agent_events": "SELECT run_id, step, kind, child_run_id, detail, tokens, remaining "
    "FROM agent_events WHERE run_id = ? ORDER BY id ASC",
    "mcp_events": "SELECT step, kind, server, tool, ok, millis, detail "
    "FROM mcp_events WHERE run_id = ? ORDER BY id ASC",
    "context_events": "SELECT step, kind, detail, est_tokens, reported_tokens "
    "FROM context_events WHERE run_id = ? ORDER BY id ASC",
    "run_policy": "SELECT policy FROM run_policies WHERE run_id = ?",
    "observations": "SELECT step, kind, target, text "
    "FROM ledger_observations WHERE run_id = ? ORDER BY id ASC",
    "sandbox_events": "SELECT run_id, step, kind, backend, detail "
    "FROM sandbox_events WHERE run_id = ? ORDER BY id ASC",
    "children": "SELECT id FROM runs WHERE parent_run_id = ? ORDER BY id ASC",
    "parent": "SELECT parent_run_id FROM runs WHERE id = ?",
    "depth": "SELECT depth FROM runs WHERE id = ?",
    "checkpoint_events": "SELECT run_id, step, kind, detail "
    "FROM checkpoint_events WHERE run_id = ? ORDER BY id ASC",
    "status": "SELECT status FROM runs WHERE id = ?",
    "elapsed_secs": "SELECT (julianday('now') - julianday(started_at)) * 86400.0 "
    "FROM runs WHERE id = ?",
    "spent_tokens": "SELECT COALESCE(SUM(tokens), 0) FROM steps WHERE run_id = ?",
    "tree_run_ids": "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = ? "
    "UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
    "SELECT id FROM tree ORDER BY id ASC",
    "spent_tokens_tree": "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = ? "
    "UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
    "SELECT COALESCE(SUM(s.tokens), 0) FROM steps s JOIN tree ON s.run_id = tree.id",
    "agent_count_tree": "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = ? "
    "UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id) "
    "SELECT COUNT(*) FROM tree",
    "find_spawn": "SELECT child_run_id, goal, verify_file, needle, max_steps, deny_write "
    "FROM spawns WHERE parent_run_id = ? AND step = ? AND goal = ? ORDER BY id ASC LIMIT 1",
    "check_resumable": "SELECT 1 FROM runs WHERE id = ?",
    "provider": "SELECT provider FROM runs WHERE id = ?",
    "run_summary": "SELECT run_id, outcome, success, steps, tokens, duration_ms, finished_at "
    "FROM run_outcomes WHERE run_id = ?",
    "runs": "SELECT id FROM runs ORDER BY id DESC",
    "outcome": "SELECT outcome FROM runs WHERE id = ?",
    "last_step": "SELECT COALESCE(MAX(step), 0) FROM steps WHERE run_id = ?",
    "steps": "SELECT step, decision, result, prompt, tool_call, tokens "
    "FROM steps WHERE run_id = ? ORDER BY step ASC, id ASC",
    "memory_list": "SELECT key, value, run_id, step, created_at FROM memory "
    "WHERE workspace = ? ORDER BY created_at ASC, id ASC",
    "memory_get": "SELECT key, value, run_id, step, created_at FROM memory "
    "WHERE workspace = ? AND key = ?",
    # Not a method: the two columns `start_run` stamps, as `elapsed_secs` reads them.
    "started_at": "SELECT started_at FROM runs WHERE id = ?",
}

#: Reads that use SQLite's date functions and have no PostgreSQL spelling as written.
SQLITE_ONLY = frozenset({"elapsed_secs"})

# --- writes `checkpoint_step` runs, in its one transaction --------------------------------

INSERT_STEP = (
    "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERT_CHECKPOINT = (
    "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (?, ?, 'checkpoint', NULL)"
)

#: upstream's clock format, `strftime('%Y-%m-%dT%H:%M:%fZ','now')`, as a regular expression.
STAMP_RE = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


def is_postgres(target: str) -> bool:
    """Whether a store target (path or URL) names a PostgreSQL database."""
    return target.startswith("postgresql")


def pg_conninfo(target: str) -> str:
    """A libpq URL for a SQLAlchemy `postgresql+psycopg://` URL."""
    rest = target.split("://", 1)[1]
    return "postgresql://" + rest


@contextmanager
def connect(target: str) -> Iterator[Any]:
    """A plain DB-API connection to the store: `sqlite3` for a path, `psycopg` for a URL."""
    if is_postgres(target):
        import psycopg

        with psycopg.connect(pg_conninfo(target), autocommit=True) as conn:
            yield conn
    else:
        path = Path(target)
        assert path.exists(), f"no store file at {path}"
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            yield conn


def execute(conn: Any, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement with `?` parameters on either kind of connection; return its rows."""
    if isinstance(conn, sqlite3.Connection):
        cursor = conn.execute(sql, args)
        rows = cursor.fetchall() if cursor.description else []
        return [tuple(r) for r in rows]
    cursor = conn.execute(sql.replace("?", "%s"), args)
    rows = cursor.fetchall() if cursor.description else []
    return [tuple(r) for r in rows]


def read(conn: Any, name: str, *args: Any) -> list[tuple[Any, ...]]:
    """Upstream's read `name` with its parameters; the rows it returns."""
    return execute(conn, READS[name], args)


def read_at(target: str, name: str, *args: Any) -> list[tuple[Any, ...]]:
    """`read` on a connection of its own."""
    with connect(target) as conn:
        return read(conn, name, *args)


#: Every 0.13 table, for "nothing was written" snapshots and "unknown to 0.13" checks.
TABLES_0_13 = (
    "runs",
    "steps",
    "policy_events",
    "pending_approvals",
    "agent_events",
    "sandbox_events",
    "checkpoint_events",
    "spawns",
    "mcp_events",
    "memory",
    "context_events",
    "run_outcomes",
    "run_policies",
    "ledger_observations",
)


# --- one-statement helpers -----------------------------------------------------------------


def raw(target: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """One statement on a connection of our own (sqlite3 / psycopg), autocommitted."""
    with connect(target) as conn:
        return execute(conn, sql, args)


def counts(target: str) -> dict[str, int]:
    """Row counts of every 0.13 table, read without harness_store."""
    with connect(target) as conn:
        return {t: execute(conn, f"SELECT COUNT(*) FROM {t}")[0][0] for t in TABLES_0_13}


def stamp(value: str) -> datetime:
    """A stamp in upstream's clock format (`STAMP_RE`) as a datetime; fails on any other."""
    assert re.match(STAMP_RE, value), value
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


def set_user_version(target: str, version: int) -> None:
    """Stamp the checkpoint format as a newer binary would (PostgreSQL: the marker table)."""
    if is_postgres(target):
        raw(target, "UPDATE harness_user_version SET user_version = ?", version)
    else:
        raw(target, f"PRAGMA user_version = {int(version)}")
