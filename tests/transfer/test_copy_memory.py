"""`harness-store copy`'s memory does not grow with the store: the rows stream, and so does
the copy's adoption as a sync origin (its id maps written a batch at a time)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.memory_growth import GROWTH, peaks, small_and_large, two_places


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two stores of finished runs, the second five times the first."""
    return small_and_large(tmp_path_factory.mktemp("runs"))


@pytest.fixture(params=["sqlite", "postgresql"])
def targets(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two empty copy targets on the backend."""
    with two_places(request.param, tmp_path) as places:
        yield places


@pytest.mark.slow
def test_copy_memory_does_not_grow_with_the_store(
    stores: tuple[Path, Path], targets: tuple[str, str]
) -> None:
    low, high = peaks("copy", stores, targets)
    # Five times the runs: a copy (or its adoption) holding a Python object per run grows
    # ~2× here (126 → 285 MiB into SQLite); a streamed one stays put.
    assert high < low * GROWTH, (low // 1024, high // 1024)
