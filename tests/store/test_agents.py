"""Spawns on both backends: `find_spawn` adopts the first child recorded for a parent step and
goal."""

from __future__ import annotations

from harness_store import (
    Store,
)


def test_find_spawn_adopts_the_first_child_for_parent_step_and_goal(db: Store) -> None:
    parent = db.start_run("p", "f")
    first = db.start_child_run("sub", "f", parent, 1)
    second = db.start_child_run("sub", "f", parent, 1)
    db.record_spawn(parent, 1, first, "sub", "out.txt", "ok", None, "[]")
    db.record_spawn(parent, 1, second, "sub", "other.txt", "ok", 5, '["*.lock"]')
    found = db.find_spawn(parent, 1, "sub")
    assert found is not None
    assert (found.child_run_id, found.verify_file, found.max_steps, found.deny_write) == (
        first,
        "out.txt",
        None,
        "[]",
    )
    assert db.find_spawn(parent, 2, "sub") is None
    assert db.find_spawn(parent, 1, "SUB") is None
