"""A first sync of sub-agent trees costs what it sends: the child runs whose parent link waits
for the end of the pass are looked at a bounded number of times each, not once a batch, so
four times the trees cost about four times the work (it was sixteen: every batch walked every
waiting child)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness_store import Store
from harness_store.sync import sync
from harness_store.sync.id_maps import IdMaps


def trees_store(path: Path, runs: int) -> Path:
    """A head store of `runs` finished runs in trees of ten (a root and nine children), written
    with the raw driver as io-harness writes them."""
    Store.open(path, backup=False).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO runs (id, goal, file, outcome, provider, depth, status, started_at, "
        "parent_run_id) VALUES (?, ?, 'src/a.rs', 'success', 'p', ?, 'completed', "
        "'2025-06-01T00:00:00.000Z', ?)",
        (
            (n, f"goal {n}", 0 if n % 10 == 1 else 1, None if n % 10 == 1 else n - (n - 1) % 10)
            for n in range(1, runs + 1)
        ),
    )
    conn.execute("COMMIT")
    conn.close()
    return path


def looks(tmp_path: Path, target: str, runs: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many times a first sync of `runs` runs in trees asks whether a row is settled."""
    counted = [0]
    unsettled = IdMaps._unsettled

    def counting(self: IdMaps, key: tuple[str, int]) -> bool:
        counted[0] += 1
        return unsettled(self, key)

    monkeypatch.setattr(IdMaps, "_unsettled", counting)
    source = trees_store(tmp_path / f"host{runs}.sqlite3", runs)
    sync([source], target, batch_size=100)
    monkeypatch.undo()
    return counted[0]


def test_a_first_sync_of_trees_looks_at_waiting_children_a_bounded_number_of_times(
    tmp_path: Path, store_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = looks(tmp_path, store_target, 1_000, monkeypatch)
    big = looks(tmp_path, store_target, 4_000, monkeypatch)  # a second origin into the same centre
    assert big <= 6 * max(small, 1), (small, big)
