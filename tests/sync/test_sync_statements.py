"""A sync into PostgreSQL sends as many statements for a store of many sub-agent trees as for
a store of few: new rows' ids and their links (a child's parent, a session's head turn, sent
in the same pass) are written set-wise, never one statement per row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from support.pg_proxy import PgProxy
from support.synccheck import mirror_problems

from harness_store import Store
from harness_store.sync import sync

CHILDREN = 4
"""Sub-agent runs under each root run."""


def tree_store(path: Path, roots: int) -> Path:
    """A head store of `roots` finished root runs, each with `CHILDREN` child runs (a child's
    id above its parent's, as io-harness lays a tree out) of two steps each, and a session per
    tree whose head turn is the tree's root's, written with the raw driver."""
    Store.open(path, backup=False).close()
    per_tree = 1 + CHILDREN
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO runs (id, goal, file, outcome, parent_run_id, depth, status, started_at) "
        "VALUES (?, ?, 'src/a.rs', 'success', ?, ?, 'completed', '2025-06-01T00:00:00.000Z')",
        (
            (n, f"goal {n}", None if n % per_tree == 1 else n - (n - 1) % per_tree, n % per_tree)
            for n in range(1, roots * per_tree + 1)
        ),
    )
    conn.executemany(
        "INSERT INTO steps (run_id, step, decision, result, tokens) VALUES (?, ?, 'd', 'ok', 5)",
        ((n, s) for n in range(1, roots * per_tree + 1) for s in (1, 2)),
    )
    for tree in range(roots):
        root = 1 + tree * per_tree
        conn.execute(
            "INSERT INTO sessions (id, root, created_at) "
            "VALUES (?, '/w', '2025-06-01T00:00:00.000Z')",
            (tree + 1,),
        )
        turn = conn.execute(
            "INSERT INTO session_turns (session_id, run_id, prompt, reply, outcome, created_at) "
            "VALUES (?, ?, 'prompt', 'reply', 'success', '2025-06-01T00:00:00.000Z')",
            (tree + 1, root),
        ).lastrowid
        conn.execute("UPDATE sessions SET head_turn_id = ? WHERE id = ?", (turn, tree + 1))
    conn.execute("COMMIT")
    conn.close()
    return path


def test_a_first_sync_sends_as_many_statements_for_four_times_the_trees(
    pg_url: str, tmp_path: Path
) -> None:
    few = tree_store(tmp_path / "few.db", 8)
    many = tree_store(tmp_path / "many.db", 32)
    proxy = PgProxy(pg_url)
    try:
        sync([], proxy.url)  # the centre's own tables, made once
        sent: dict[str, tuple[int, int]] = {}
        for name, source in (("few", few), ("many", many)):
            with proxy.counting() as messages:
                report = sync([source], proxy.url)
                sent[name] = (proxy.statements(messages), messages[b"S"])
            assert report.origins[0].counts.orphans == {}
        assert sent["many"] == sent["few"], "statements and round trips, few against many"
    finally:
        proxy.close()
    for source in (few, many):
        assert mirror_problems(pg_url, source) == []
