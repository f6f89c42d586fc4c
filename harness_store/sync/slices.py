"""The destination transactions one source's changes are written in (`Slices`): one, or
into a SQLite centre one slice after another."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from sqlalchemy import Connection

Writing = Callable[[], AbstractContextManager[Connection]]
"""The destination transaction one source's changes are written in."""


class Slices:
    """The destination transactions one source's changes are written in: one, or (a SQLite
    centre, whose writers wait for each) one after another (`origin_state.SliceControl`):
    the first registers the origin, a read snapshot (`reading`) reads its id maps and marks,
    and each slice then commits its rows with theirs. The one open when the body raises is
    rolled back (a snapshot ended); the ones committed before stay."""

    def __init__(self, writing: Writing) -> None:
        self.writing = writing
        self.reading: Writing | None = None
        self.check: Callable[[], None] = lambda: None
        """Raises when the source is no longer as it was read (checked before each commit)."""
        self.stack = ExitStack()
        self.dst = self.stack.enter_context(writing())
        self.writes = True

    def __enter__(self) -> Slices:
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return self.stack.__exit__(*exc)

    def _end(self) -> None:
        if self.writes:
            self.check()
        self.stack.close()
        self.stack = ExitStack()

    def open_slice(self) -> Connection:
        self._end()
        self.dst = self.stack.enter_context(self.writing())
        self.writes = True
        return self.dst

    def commit(self) -> None:
        self._end()
        self.writes = False

    def read(self) -> Connection:
        assert self.reading is not None
        self._end()
        self.writes = False
        return self.stack.enter_context(self.reading())
