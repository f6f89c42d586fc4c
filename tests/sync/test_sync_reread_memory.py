"""A pass that compares an existing origin whole — its source pruned (the counts no longer
agree), or restored from an older backup (its history went back) — streams that compare: its
memory does not grow with the store (no Python object per run held for the pass)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import peak_rss_kib
from support.memory_growth import GROWTH, small_and_large, two_places

GONE = range(1_001, 2_001)
"""The runs a prune deletes in the source: as many in either store."""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two stores of finished runs, the second five times the first."""
    return small_and_large(tmp_path_factory.mktemp("runs"))


@pytest.fixture(params=["sqlite", "postgresql"])
def centres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two new centres on the backend."""
    with two_places(request.param, tmp_path) as places:
        yield places


def _prune(path: Path) -> None:
    """Delete the runs `GONE` with their rows, as a prune does: the source's counts then
    differ from the centre's maps, and the next pass compares every table whole."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    low, high = GONE[0], GONE[-1]
    conn.execute("DELETE FROM session_turns WHERE run_id BETWEEN ? AND ?", (low, high))
    conn.execute("DELETE FROM steps WHERE run_id BETWEEN ? AND ?", (low, high))
    conn.execute("DELETE FROM runs WHERE id BETWEEN ? AND ?", (low, high))
    conn.execute("COMMIT")
    conn.close()


def _grow(path: Path) -> None:
    """A thousand runs more, with a step each, past what the store held."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    top = int(conn.execute("SELECT max(id) FROM runs").fetchone()[0])
    new = range(top + 1, top + 1_001)
    conn.executemany(
        "INSERT INTO runs (id, goal, file, outcome, provider, depth, status, started_at) "
        "VALUES (?, ?, 'src/b.rs', 'success', 'p', 0, 'completed', '2025-06-02T00:00:00.000Z')",
        ((n, f"later {n}") for n in new),
    )
    conn.executemany(
        "INSERT INTO steps (run_id, step, decision, result, tokens) VALUES (?, 1, 'd', 'ok', 5)",
        ((n,) for n in new),
    )
    conn.execute("COMMIT")
    conn.close()


def _reread_peak(kind: str, store: Path, centre: str, where: Path) -> int:
    """Sync a copy of `store` into `centre`, change the copy as `kind` says, and measure the
    peak memory of the pass that compares it whole."""
    where.mkdir()
    source = where / "agent.sqlite3"
    shutil.copyfile(store, source)
    if kind == "restored":
        backup = where / "agent.sqlite3.bak"
        shutil.copyfile(source, backup)
        _grow(source)
        peak_rss_kib("sync", source, centre)
        shutil.copyfile(backup, source)  # the backup restored over the source
    else:
        peak_rss_kib("sync", source, centre)
        _prune(source)
    return peak_rss_kib("sync", source, centre)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pruned", "restored"])
def test_a_whole_compare_of_an_existing_origin_does_not_grow_with_the_store(
    stores: tuple[Path, Path], centres: tuple[str, str], tmp_path: Path, kind: str
) -> None:
    small, large = stores
    low = _reread_peak(kind, small, centres[0], tmp_path / "small")
    high = _reread_peak(kind, large, centres[1], tmp_path / "large")
    assert high < low * GROWTH, (low // 1024, high // 1024)
