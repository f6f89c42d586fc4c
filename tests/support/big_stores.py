"""Legacy stores with many rows for the kill and race tests of an upgrade, and the check that a
store is whole at one revision: untouched at its release, or fully at head, never in between,
every original row intact."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_store import Store
from harness_store.releases import HEAD
from support import legacy
from support.sqlite_files import connect

BULK_STEPS = 50_000


@dataclass
class BigStore:
    """A legacy store with many rows, and what it looks like before and after the upgrade."""

    path: Path
    shapes: dict[str, list[tuple[Any, ...]]]
    columns: dict[str, list[str]]
    rows: dict[str, list[tuple[Any, ...]]]
    plain_rows: dict[str, list[tuple[Any, ...]]]
    user_version: int
    head_shapes: dict[str, list[tuple[Any, ...]]]
    head_indexes: list[str]


def bulk_steps(path: Path, release: str) -> None:
    """Add a run with `BULK_STEPS` steps in the columns `release` has."""
    conn = connect(path)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        run_id = conn.execute("INSERT INTO runs (goal, file) VALUES ('bulk', 'bulk.txt')").lastrowid
        body = "lorem ipsum 'dolor' \"sit\" ámet 🦀 " * 4
        if release == "0.1":
            rows: Iterator[tuple[Any, ...]] = (
                (run_id, i, f"decision {i}", body[: i % 150]) for i in range(1, BULK_STEPS + 1)
            )
            sql = "INSERT INTO steps (run_id, step, decision, result) VALUES (?, ?, ?, ?)"
        else:
            rows = (
                (run_id, i, f"decision {i}", body[: i % 150], "p", "{}", i)
                for i in range(1, BULK_STEPS + 1)
            )
            sql = (
                "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)"
            )
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
    finally:
        conn.close()


def make_big_store(directory: Path, release: str) -> BigStore:
    path = directory / f"big-{release}.sqlite3"
    legacy.build_lineage(path, release)
    bulk_steps(path, release)
    conn = connect(path)
    try:
        shapes = legacy.table_shapes(conn)
        columns = legacy.column_names(conn)
        rows = legacy.dump(conn, typed=True)
        plain_rows = legacy.dump(conn)
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    reference = directory / f"reference-{release}.sqlite3"
    shutil.copyfile(path, reference)
    Store.open(reference, backup=False).close()
    conn = connect(reference)
    try:
        head_shapes = legacy.table_shapes(conn)
        head_indexes = indexes(conn)
    finally:
        conn.close()
    return BigStore(
        path, shapes, columns, rows, plain_rows, user_version, head_shapes, head_indexes
    )


def indexes(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
        )
    ]


def whole_revision(path: Path, big: BigStore, *, typed: bool = True) -> str:
    """'original' (untouched shape, no alembic_version) or 'head' (fully upgraded) — anything
    in between fails. Either way every original row is intact."""
    conn = connect(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        shapes = legacy.table_shapes(conn)
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        found = indexes(conn)
        if "alembic_version" in tables:
            state = "head"
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
            assert shapes == big.head_shapes
            assert user_version == 7
            assert found == big.head_indexes
        else:
            state = "original"
            assert shapes == big.shapes, "a killed upgrade left a half-upgraded shape"
            assert user_version == big.user_version
            assert found == [], "a killed upgrade left indexes behind"
        rows = big.rows if typed else big.plain_rows
        assert legacy.dump(conn, big.columns, typed=typed) == rows, "rows changed"
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    return state


def runs_store(path: Path, runs: int) -> Path:
    """A head store of `runs` finished root runs written with the raw driver in one
    transaction, as io-harness writes: a step each, every tenth run in a session turn."""
    Store.open(path, backup=False).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO runs (id, goal, file, outcome, provider, depth, status, started_at) "
        "VALUES (?, ?, 'src/a.rs', 'success', 'p', 0, 'completed', '2025-06-01T00:00:00.000Z')",
        ((n, f"goal {n}") for n in range(1, runs + 1)),
    )
    conn.executemany(
        "INSERT INTO steps (run_id, step, decision, result, tokens) VALUES (?, 1, 'd', 'ok', 5)",
        ((n,) for n in range(1, runs + 1)),
    )
    conn.execute(
        "INSERT INTO sessions (id, root, created_at) VALUES (1, '/w', '2025-06-01T00:00:00.000Z')"
    )
    conn.executemany(
        "INSERT INTO session_turns (session_id, run_id, prompt, reply, outcome, created_at) "
        "VALUES (1, ?, 'prompt', 'reply', 'success', '2025-06-01T00:00:00.000Z')",
        ((n,) for n in range(1, runs + 1, 10)),
    )
    conn.execute("COMMIT")
    conn.close()
    return path
