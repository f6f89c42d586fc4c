"""The store a sync writes into, held one way by `sync` and by `follow`: its target parsed
once, its connector made once (`connector_at`), and made ready for a sync once — created or
upgraded to head as `Store.open` does, sync's own tables added (`core.prepare_dest`) — before
the first pass. Every pass, of a `sync` and of a follower alike, writes through that one
connector; a follower whose pass failed has it made ready again before its next
(`forget`), for a centre that was restarted or restored meanwhile."""

from __future__ import annotations

import os
import threading
from contextlib import ExitStack

from sqlalchemy.engine import URL

from ..connector import Connector, connector_at
from ..targets import Target


class Destination:
    """A sync's destination, held for a whole `sync` or `follow` (see the module): a context
    manager, whose exit closes the connector. The connector is made by the first `prepare`,
    so a centre out of reach at the start fails there, where a follower waits for it."""

    def __init__(self, dest: str | os.PathLike[str] | URL | Target) -> None:
        self.target = Target.parse(dest)
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._held: Connector | None = None
        self._ready = False

    def __enter__(self) -> Destination:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> URL:
        return self.target.url

    @property
    def connector(self) -> Connector:
        """The one connector every pass writes through (made by the first `prepare`)."""
        if self._held is None:
            raise AssertionError("a destination is prepared before its first pass")
        return self._held

    def prepare(self) -> None:
        """Make the destination ready for a sync, unless it was made so since the last
        `forget` (once, whichever pass or thread asks first)."""
        from .core import prepare_dest

        with self._lock:
            if self._held is None:
                self._held = self._stack.enter_context(connector_at(self.target))
            if not self._ready:
                prepare_dest(self._held, self.url)
                self._ready = True

    def forget(self) -> None:
        """Have the destination made ready again before the next pass (a pass failed: the
        centre may have been restarted, restored or changed meanwhile)."""
        with self._lock:
            self._ready = False

    def close(self) -> None:
        """Close the connector. Idempotent."""
        with self._lock:
            self._stack.close()
            self._held = None
            self._ready = False
