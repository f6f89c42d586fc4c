"""Whether a command's memory grows with the store it reads: two stores of finished runs, the
second five times the first (`small_and_large`), two new places to write into on a backend
(`two_places`), and the command's peak resident memory over each pair (`peaks`). The sync and
copy memory tests share them, so they build and measure alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .big_stores import runs_store
from .clirun import peak_rss_kib
from .pg_databases import store_location

SMALL, LARGE = 20_000, 100_000
"""The runs of the two stores: five times the runs, so that a command holding a Python
object per run shows it plainly (about twice the peak) over what a streamed one holds."""

GROWTH = 1.25
"""How much higher the large store's peak may be than the small one's: a streamed command
stays well within it, one holding an object per run grows about 2×."""


def small_and_large(directory: Path) -> tuple[Path, Path]:
    """Two stores of finished runs in `directory`, `SMALL` and `LARGE` runs."""
    return (
        runs_store(directory / "small.sqlite3", SMALL),
        runs_store(directory / "large.sqlite3", LARGE),
    )


@contextmanager
def _location(backend: str, path: Path) -> Iterator[str]:
    places = store_location(backend, path)
    try:
        yield next(places)
    finally:
        places.close()


@contextmanager
def two_places(backend: str, directory: Path) -> Iterator[tuple[str, str]]:
    """Two new, empty places on `backend` (SQLite files in `directory`, or PostgreSQL
    databases), given back when the block ends."""
    with ExitStack() as stack:
        small = stack.enter_context(_location(backend, directory / "small.sqlite3"))
        large = stack.enter_context(_location(backend, directory / "large.sqlite3"))
        yield small, large


def peaks(command: str, stores: tuple[Path, Path], places: tuple[str, str]) -> tuple[int, int]:
    """The peak resident memory (KiB) of `harness-store COMMAND SOURCE PLACE`, the small
    store into the first place, then the large one into the second."""
    return (
        peak_rss_kib(command, stores[0], places[0]),
        peak_rss_kib(command, stores[1], places[1]),
    )
