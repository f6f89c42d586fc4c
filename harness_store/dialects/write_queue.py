"""The queue a Store's write transactions join: `WriteQueue`, the interface, which is also
the default of a backend whose database serialises writers fairly itself (SQLite's is
`sqlite_queue.SQLiteWriteQueue`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class WriteQueue:
    """Where a Store's write transactions wait their turn behind other processes' (no queue
    here: the database itself serialises writers fairly)."""

    @contextmanager
    def turn(self) -> Iterator[float | None]:
        """Hold this process's place at the head of the queue for one write transaction;
        yields the deadline for beginning it (None: no queue, the backend's own timeout)."""
        yield None

    def begin(self, cursor: Any) -> None:
        """Take this process's turn and open a write transaction on a driver cursor (the hot
        path: no context manager). Ended by `end` after the commit or rollback. Here nothing:
        the driver opens a transaction on the first statement."""

    def end(self) -> None:
        """Give up the turn `begin` took."""

    def settle(self, connection: Any) -> None:
        """Undo what `begin` changed on a driver connection (before other uses of it)."""

    def forked(self) -> None:
        """In a child after `fork()`: forget the parent's handle on the queue."""

    def close(self) -> None:
        """Let go of the queue for good."""
