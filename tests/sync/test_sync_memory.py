"""A first `harness-store sync` of a store streams it: its memory does not grow with the
store (no Python object per run held for the pass)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.memory_growth import (  # noqa: F401 (the sizes, as this module named them)
    GROWTH,
    LARGE,
    SMALL,
    peaks,
    small_and_large,
    two_places,
)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two stores of finished runs, the second five times the first."""
    return small_and_large(tmp_path_factory.mktemp("runs"))


@pytest.fixture(params=["sqlite", "postgresql"])
def centres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two new centres on the backend."""
    with two_places(request.param, tmp_path) as places:
        yield places


@pytest.mark.slow
def test_first_sync_memory_does_not_grow_with_the_store(
    stores: tuple[Path, Path], centres: tuple[str, str]
) -> None:
    low, high = peaks("sync", stores, centres)
    # Five times the runs: a pass holding every row's id map grows ~2× here (105 → 185 MiB
    # into SQLite, 137 → 299 into PostgreSQL); a streamed one stays put.
    assert high < low * GROWTH, (low // 1024, high // 1024)
