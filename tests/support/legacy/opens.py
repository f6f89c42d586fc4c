"""What each release's `Store::open` runs on a new or older file, in upstream's order: the
CREATEs and ALTERs tagged with the release that brought them, the file pragmas, the
`user_version` stamp; `open_as` replays them (whole, or torn part-way).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

RELEASES: tuple[str, ...] = tuple(f"0.{n}" for n in range(1, 14))


#: The checkpoint format 0.7+ stamps into `PRAGMA user_version`.
CHECKPOINT_FORMAT = 7


#: Statements 0.12+'s `Store::open` runs on a file before the open sequence.
FILE_PRAGMAS: tuple[str, ...] = ("PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL")


def _minor(release: str) -> int:
    """Return the minor number of a release name, rejecting names outside 0.1 … 0.13."""
    if release not in RELEASES:
        raise ValueError(f"unknown release {release!r}; expected one of {RELEASES}")
    return int(release.split(".")[1])


def _create(table: str, *columns: str) -> str:
    """Render a CREATE statement with upstream's exact whitespace (SQLite stores it verbatim)."""
    body = ",\n".join(" " * 17 + c for c in columns)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n{body}\n{' ' * 13})"


_RUNS_0_1 = _create(
    "runs",
    "id      INTEGER PRIMARY KEY AUTOINCREMENT",
    "goal    TEXT NOT NULL",
    "file    TEXT NOT NULL",
    "outcome TEXT",
)


_RUNS_0_3 = _create(
    "runs",
    "id       INTEGER PRIMARY KEY AUTOINCREMENT",
    "goal     TEXT NOT NULL",
    "file     TEXT NOT NULL",
    "outcome  TEXT",
    "provider TEXT",
)


_STEPS_COLS_0_1 = (
    "id       INTEGER PRIMARY KEY AUTOINCREMENT",
    "run_id   INTEGER NOT NULL REFERENCES runs(id)",
    "step     INTEGER NOT NULL",
    "decision TEXT NOT NULL",
    "result   TEXT NOT NULL",
)


_STEPS_0_1 = _create("steps", *_STEPS_COLS_0_1)


_STEPS_0_2 = _create(
    "steps",
    *_STEPS_COLS_0_1,
    "prompt    TEXT NOT NULL DEFAULT ''",
    "tool_call TEXT NOT NULL DEFAULT ''",
    "tokens    INTEGER NOT NULL DEFAULT 0",
)


_STAMP = f"PRAGMA user_version = {CHECKPOINT_FORMAT}"


# Every statement after the runs/steps CREATEs, in upstream order, with the minor release
# that introduced it.
_LATER: tuple[tuple[int, str], ...] = (
    (2, "ALTER TABLE steps ADD COLUMN prompt TEXT NOT NULL DEFAULT ''"),
    (2, "ALTER TABLE steps ADD COLUMN tool_call TEXT NOT NULL DEFAULT ''"),
    (2, "ALTER TABLE steps ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0"),
    (3, "ALTER TABLE runs ADD COLUMN provider TEXT"),
    (
        4,
        _create(
            "policy_events",
            "id        INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id    INTEGER NOT NULL",
            "step      INTEGER NOT NULL",
            "kind      TEXT NOT NULL",
            "act       TEXT NOT NULL",
            "target    TEXT NOT NULL",
            "rule      TEXT",
            "layer     TEXT",
            "decision  TEXT",
            "source    TEXT",
            "performed TEXT",
        ),
    ),
    (
        4,
        _create(
            "pending_approvals",
            "id       INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id   INTEGER NOT NULL",
            "step     INTEGER NOT NULL",
            "act      TEXT NOT NULL",
            "target   TEXT NOT NULL",
            "content  TEXT",
            "resolved TEXT",
        ),
    ),
    (5, "ALTER TABLE runs ADD COLUMN parent_run_id INTEGER"),
    (5, "ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0"),
    (
        5,
        _create(
            "agent_events",
            "id           INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id       INTEGER NOT NULL",
            "step         INTEGER NOT NULL",
            "kind         TEXT NOT NULL",
            "child_run_id INTEGER",
            "detail       TEXT",
            "tokens       INTEGER",
            "remaining    INTEGER",
        ),
    ),
    (
        6,
        _create(
            "sandbox_events",
            "id       INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id   INTEGER NOT NULL",
            "step     INTEGER NOT NULL",
            "kind     TEXT NOT NULL",
            "backend  TEXT",
            "detail   TEXT",
        ),
    ),
    (7, "ALTER TABLE runs ADD COLUMN status TEXT NOT NULL DEFAULT 'running'"),
    (7, "ALTER TABLE runs ADD COLUMN started_at TEXT"),
    (
        7,
        _create(
            "checkpoint_events",
            "id     INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id INTEGER NOT NULL",
            "step   INTEGER NOT NULL",
            "kind   TEXT NOT NULL",
            "detail TEXT",
        ),
    ),
    (
        7,
        _create(
            "spawns",
            "id            INTEGER PRIMARY KEY AUTOINCREMENT",
            "parent_run_id INTEGER NOT NULL",
            "step          INTEGER NOT NULL",
            "child_run_id  INTEGER NOT NULL",
            "goal          TEXT NOT NULL",
            "verify_file   TEXT NOT NULL",
            "needle        TEXT NOT NULL",
            "max_steps     INTEGER",
            "deny_write    TEXT NOT NULL DEFAULT '[]'",
        ),
    ),
    (
        8,
        _create(
            "mcp_events",
            "id     INTEGER PRIMARY KEY AUTOINCREMENT",
            "run_id INTEGER NOT NULL",
            "step   INTEGER NOT NULL",
            "kind   TEXT NOT NULL",
            "server TEXT NOT NULL",
            "tool   TEXT",
            "ok     INTEGER",
            "millis INTEGER",
            "detail TEXT",
        ),
    ),
    (
        10,
        _create(
            "memory",
            "id         INTEGER PRIMARY KEY",
            "workspace  TEXT NOT NULL",
            "key        TEXT NOT NULL",
            "value      TEXT NOT NULL",
            "run_id     INTEGER NOT NULL",
            "step       INTEGER NOT NULL",
            "created_at TEXT NOT NULL",
            "UNIQUE(workspace, key)",
        ),
    ),
    (
        10,
        _create(
            "context_events",
            "id              INTEGER PRIMARY KEY",
            "run_id          INTEGER NOT NULL",
            "step            INTEGER NOT NULL",
            "kind            TEXT NOT NULL",
            "detail          TEXT",
            "est_tokens      INTEGER",
            "reported_tokens INTEGER",
        ),
    ),
    (
        12,
        _create(
            "run_outcomes",
            "run_id      INTEGER PRIMARY KEY",
            "outcome     TEXT NOT NULL",
            "success     INTEGER NOT NULL",
            "steps       INTEGER NOT NULL",
            "tokens      INTEGER NOT NULL",
            "duration_ms INTEGER",
            "finished_at TEXT NOT NULL",
        ),
    ),
    (13, _create("run_policies", "run_id INTEGER PRIMARY KEY", "policy TEXT NOT NULL")),
    (
        13,
        _create(
            "ledger_observations",
            "id     INTEGER PRIMARY KEY",
            "run_id INTEGER NOT NULL",
            "step   INTEGER NOT NULL",
            "kind   TEXT NOT NULL",
            "target TEXT",
            "text   TEXT NOT NULL",
        ),
    ),
    (7, _STAMP),
)


def _tagged_statements(release: str) -> list[tuple[int, str]]:
    """Return release X's open statements, each with the minor release that introduced it."""
    m = _minor(release)
    runs = _RUNS_0_3 if m >= 3 else _RUNS_0_1
    steps = _STEPS_0_2 if m >= 2 else _STEPS_0_1
    return [(1, runs), (1, steps), *((v, s) for v, s in _LATER if v <= m)]


def open_statements(release: str) -> list[str]:
    """Return the SQL statements release X's `Store::from_conn` runs on open, in order.

    The last one from 0.7 on is the `user_version` stamp, which upstream runs only when the
    stored version is below 7 (it reads `PRAGMA user_version` first; that read changes
    nothing and is not listed).
    """
    return [sql for _, sql in _tagged_statements(release)]


def torn_points(release: str) -> list[int]:
    """Return the kill points k (statements run) that leave a store torn between X-1 and X.

    A point follows a statement that changes a store of the previous release (a new table,
    a new column, the first `user_version` stamp) and precedes another such statement.
    """
    m = _minor(release)
    changing = [k for k, (v, _) in enumerate(_tagged_statements(release), 1) if v == m]
    return changing[:-1]


def is_file_connection(conn: sqlite3.Connection) -> bool:
    """Tell whether the connection's main database is a file (not `:memory:` or temp)."""
    return any(row[1] == "main" and row[2] for row in conn.execute("PRAGMA database_list"))


def new_sqlite(path: Path, release: str, *statements: str) -> None:
    """A store with `release`'s shape as upstream's open leaves it, plus rows inserted raw."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        open_as(conn, release, file=True)
        for sql in statements:
            conn.execute(sql)


def open_as(
    conn: sqlite3.Connection,
    release: str,
    *,
    stop_after: int | None = None,
    file: bool | None = None,
) -> None:
    """Run release X's open on `conn` the way upstream does: each statement in autocommit.

    An ALTER's "duplicate column name" error is ignored as upstream ignores it. From 0.12, a
    file store first gets `busy_timeout` and WAL as `Store::open` sets them (`file=None`
    detects a file connection; pass a bool to force). `stop_after=k` runs only the first k
    open statements, as if the process were killed there (the pragmas still run).
    """
    tagged = _tagged_statements(release)
    if file is None:
        file = is_file_connection(conn)
    previous = conn.isolation_level
    conn.isolation_level = None
    try:
        if _minor(release) >= 12 and file:
            for pragma in FILE_PRAGMAS:
                conn.execute(pragma).fetchall()
        for _, sql in tagged[:stop_after]:
            if sql == _STAMP:
                if conn.execute("PRAGMA user_version").fetchone()[0] < CHECKPOINT_FORMAT:
                    conn.execute(sql)
            elif sql.startswith("ALTER TABLE"):
                try:
                    conn.execute(sql)
                except sqlite3.OperationalError as exc:
                    if "duplicate column name" not in str(exc):
                        raise
            else:
                conn.execute(sql)
    finally:
        conn.isolation_level = previous
