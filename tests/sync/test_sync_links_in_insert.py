"""A first sync of a store of sub-agent trees writes each child run's parent link in the
insert itself (the central ids are taken before the rows are written), and remaps the steps
through the run ids the pass wrote: no `UPDATE` of the runs' links after the children, no
read of the id maps back from the centre."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from support.synccheck import mirror_problems

from harness_store import Store
from harness_store.sync import sync

PER_TREE = 5
"""Runs in each tree: a root and its children (a child's id above its parent's)."""


def trees_store(path: Path, trees: int) -> Path:
    """A head store of `trees` finished trees of `PER_TREE` runs, two steps a run, written
    with the raw driver as io-harness writes them."""
    Store.open(path, backup=False).close()
    runs = trees * PER_TREE
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO runs (id, goal, file, outcome, parent_run_id, depth, status, started_at) "
        "VALUES (?, ?, 'src/a.rs', 'success', ?, ?, 'completed', '2025-06-01T00:00:00.000Z')",
        (
            (n, f"goal {n}", None if n % PER_TREE == 1 else n - (n - 1) % PER_TREE, n % PER_TREE)
            for n in range(1, runs + 1)
        ),
    )
    conn.executemany(
        "INSERT INTO steps (run_id, step, decision, result) VALUES (?, ?, 'd', 'ok')",
        ((n, s) for n in range(1, runs + 1) for s in (1, 2)),
    )
    conn.execute("COMMIT")
    conn.close()
    return path


@contextmanager
def statements() -> Iterator[list[str]]:
    """The SQL of every statement any engine of this process runs during the body."""
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(" ".join(str(args[2]).split()))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


def test_a_first_sync_of_trees_writes_the_parent_links_with_the_runs(
    tmp_path: Path, store_target: str
) -> None:
    source = trees_store(tmp_path / "trees.sqlite3", 120)
    sync([], store_target)  # the centre's own tables, made once
    with statements() as sent:
        report = sync([source], store_target, batch_size=200)
    assert report.origins[0].counts.orphans == {}
    assert report.origins[0].counts.inserted["runs"] == 120 * PER_TREE
    updates = [s for s in sent if s.upper().startswith('UPDATE "RUNS"') or "UPDATE runs" in s]
    assert updates == [], updates[:3]
    read_back = [s for s in sent if "hs_sync_ids" in s and s.upper().startswith("SELECT")]
    assert not [s for s in read_back if "src_id IN" in s], read_back[:3]
    assert mirror_problems(store_target, source) == []


def test_a_child_sent_before_its_parent_is_linked_once_the_parent_is_sent(
    tmp_path: Path, store_target: str
) -> None:
    source = trees_store(tmp_path / "trees.sqlite3", 60)
    with sqlite3.connect(source) as conn:  # the first tree's root's parent: the last run
        conn.execute("UPDATE runs SET parent_run_id = ? WHERE id = 1", (60 * PER_TREE,))
    report = sync([source], store_target, batch_size=50)
    assert report.origins[0].counts.orphans == {}
    assert mirror_problems(store_target, source) == []
