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


def slice_pages_for(free: int, most: int) -> int:
    """The pages the next compact slice gives back when `free` pages are free: at most
    `most`, within `COMPACT_SLICE_WORK`, and at least one."""
    return max(1, min(most, COMPACT_SLICE_WORK // max(free, 1)))


STEP_ASIDE = 0.005
"""The least a maintenance command waits between two of its slices (seconds): longer than a
queued writer's retry (`sqlite_queue.wait_turn`: every 2 ms at most), so the writers waiting
get the next turn instead of the slice after."""


def step_aside(began: float) -> None:
    """Between two slices of a maintenance command (the last began at `began`, monotonic):
    leave the store to its writers for as long as that slice held it, and at least
    `STEP_ASIDE`, so the command holds the writers' turn at most half the time and every
    writer waiting, queued or on SQLite's busy handler, has its turn before the next slice."""
    time.sleep(max(STEP_ASIDE, time.monotonic() - began))


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
        a time (fewer while many are free: `COMPACT_SLICE_WORK`), each slice its own short
        write transaction in the writers' turn, stepping aside
        between slices (`step_aside`), so a live writer waits for a slice, not the file, and
        a compact stopped between slices has lost nothing (what it gave back stays given
        back); a store io-harness made is switched to that mode by one `VACUUM` that
        rewrites the whole file, writers waiting meanwhile, once. PostgreSQL: `VACUUM` marks
        dead rows' space reusable beside live writers (the files shrink only at their tail;
        `VACUUM FULL` would lock every table). Returns how many bytes the store shrank by.

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
        pages = 1  # the first slice also says how many pages are free
        while sliced:
            began = time.monotonic()
            with self._maintenance() as driver:  # one slice, one turn
                now = self._backend.vacuum_slice(driver, pages)
            if now == 0 or (left is not None and now >= left):
                break  # all given back, or writers free pages as fast as it gives them back
            left = now
            pages = slice_pages_for(now, slice_pages)
            step_aside(began)
        after = self.store_size().file_bytes
        return max(before - after, 0)
