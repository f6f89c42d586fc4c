"""The store's footprint and giving its free space back (`store_size`, `compact`), and the
pause every maintenance command takes between two of its slices (`step_aside`), so live writers
wait for a slice, never for the whole store."""

from __future__ import annotations

import time

from sqlalchemy import (
    func,
    select,
)

from ..errors import InvalidValueError
from ..formats import is_int
from ..records import StoreSize
from .marks import maintains, reads
from .release_tables import OlderStoreMixin
from .retention_rows import table

COMPACT_SLICE_PAGES = 256
"""The most free pages a compact gives back per write transaction (1 MiB of 4 KiB pages)."""

COMPACT_SLICE_WORK = 4_000_000
"""Pages a compact slice may give back times the pages free when it begins. Giving back a
free page at the file's end makes SQLite search the free list for it, one entry a free page,
so a slice of a fixed number of pages costs more the more is free (on a store of a million
runs pruned by half, 256 pages took up to 0.4 s, a live writer waiting as long); within this
budget a slice is tens of milliseconds however much is free."""


SLICE_LEAST_PAGES = 16
"""The fewest pages a compact slice gives back when `Pace` shrinks it (while that many are
asked for): a slice of fewer costs about as much."""


def slice_pages_for(free: int, most: int) -> int:
    """The pages the next compact slice gives back when `free` pages are free: at most
    `most`, within `COMPACT_SLICE_WORK`, and at least one."""
    return max(1, min(most, COMPACT_SLICE_WORK // max(free, 1)))


STEP_ASIDE = 0.005
"""What a maintenance command waits between two of its slices beyond the time the last slice
held the store (seconds): longer than a queued writer's retry (`sqlite_queue.wait_turn`: every
2 ms at most), so the writers waiting get the next turn instead of the slice after."""

SLICE_SECONDS = 0.05
"""About how long one slice of a maintenance command holds the writers' turn (seconds): a
live writer waits about that long, whatever the store's size or the machine's load (`Pace`)."""


def step_aside(began: float) -> None:
    """Between two slices of a maintenance command (the last began at `began`, monotonic):
    leave the store to its writers for as long as that slice held it, and `STEP_ASIDE` more,
    so the command holds the writers' turn at most half the time and every writer waiting has
    its turn before the next slice: a queued one retries every 2 ms at most, and SQLite's busy
    handler (io-harness's writers) sleeps at most about as long as it has waited already (1,
    2, 5, 10, 15, 20, 25 ms …), so one that began waiting during the slice wakes within the
    pause."""
    time.sleep(max(time.monotonic() - began, 0.0) + STEP_ASIDE)


class Pace:
    """How big a maintenance command's next slice is, as a share (≤ 1) of its full size, so
    that each slice holds the writers' turn about `seconds`: a slice's size bounds the rows it
    touches, but not its time, which grows with the machine's load and the store's cache
    misses. After each slice, `took` learns what a full slice would take (the slice's time
    over the share of a full one it was): a slice over twice `seconds` sets the next share to
    fit `seconds`; one under `seconds` lets the share grow, at most twice a slice, so one
    quick slice does not undo what slow ones taught; in between the share stays, so a moment
    the command was not scheduled does not halve the slices."""

    def __init__(self, seconds: float = SLICE_SECONDS) -> None:
        self.seconds = seconds
        self.share = 1.0

    def took(self, seconds: float, share: float) -> None:
        """A slice `share` of a full one (> 0; a slice that could not be split may be over
        1) held the store `seconds`."""
        fits = self.seconds / (max(seconds, 1e-6) / max(share, 1e-9))
        if seconds > 2 * self.seconds:
            self.share = min(1.0, fits)
        elif seconds < self.seconds:
            self.share = min(1.0, 2 * self.share, fits)

    def scaled(self, full: int, least: int = 1) -> int:
        """`full` (a slice's full size) at the current share, and at least `least` (or
        `full`, when smaller): below a few dozen runs or pages a slice's fixed cost is
        most of its time, and halving it would not halve the wait."""
        return max(min(least, full), int(full * self.share), 1)


class StoreSpaceMixin(OlderStoreMixin):
    """How big the store is, and giving the space deletions freed back."""

    @reads
    def store_size(self) -> StoreSize:
        """The store's footprint: bytes in use and free, sessions and runs, and bytes per table
        and index, largest first (SQLite pages through `dbstat`; PostgreSQL relation sizes)."""
        s, r = table("sessions"), table("runs")
        has_sessions = not self._lacks("sessions")
        with self._read() as conn:
            file_bytes, free_bytes, tables = self._backend.footprint(conn)
            sessions = 0
            if has_sessions:
                sessions = int(conn.execute(select(func.count()).select_from(s)).scalar())
            runs = int(conn.execute(select(func.count()).select_from(r)).scalar())
        tables.sort(key=lambda item: (-item[1], item[0]))
        return StoreSize(file_bytes, free_bytes, sessions, runs, tables)

    @maintains
    def compact(self, *, slice_pages: int = COMPACT_SLICE_PAGES) -> int:
        """Give the space deletions freed back. SQLite: a store in incremental auto-vacuum
        (every store harness_store makes) gives its free pages back at most `slice_pages` at
        a time (fewer while many are free: `COMPACT_SLICE_WORK`, and after a slice over twice
        `SLICE_SECONDS`, as many as fit it: `Pace`), each slice its own write transaction in the
        writers' turn, stepping aside between slices (`step_aside`), so a live writer waits
        for a slice, not the file, and a compact stopped between slices has lost nothing
        (what it gave back stays given back); a store io-harness made is switched to that
        mode by one `VACUUM` that rewrites the whole file, writers waiting meanwhile, once.
        PostgreSQL: `VACUUM` marks dead rows' space reusable beside live writers (the files
        shrink only at their tail; `VACUUM FULL` would lock every table). Returns how many
        bytes the store shrank by.

        Outside any transaction only: inside a `transaction()` block it raises
        `TransactionOpenError` and does nothing."""
        if not is_int(slice_pages) or slice_pages < 1:
            raise InvalidValueError(f"slice_pages must be a positive number, not {slice_pages!r}")
        before = self.store_size().file_bytes
        with self._maintenance() as driver:
            sliced = self._backend.vacuums_in_slices(driver)
            if not sliced:
                self._backend.vacuum(driver)
        left: int | None = None
        pages = full = 1  # the first slice also says how many pages are free
        pace = Pace()
        while sliced:
            began = time.monotonic()
            with self._maintenance() as driver:  # one slice, one turn
                now = self._backend.vacuum_slice(driver, pages)
            pace.took(time.monotonic() - began, pages / full)
            if now == 0 or (left is not None and now >= left):
                break  # all given back, or writers free pages as fast as it gives them back
            left = now
            full = slice_pages_for(now, slice_pages)
            pages = pace.scaled(full, SLICE_LEAST_PAGES)
            step_aside(began)
        after = self.store_size().file_bytes
        return max(before - after, 0)
