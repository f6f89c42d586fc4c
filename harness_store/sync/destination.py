"""The store a sync writes into, held one way by `sync` and by `follow`: its target parsed
once, its connector made once (`connector_at`), and made ready for a sync once — created or
upgraded to head as `Store.open` does, sync's own tables added (`prepare_dest`) — before
the first pass. Every pass, of a `sync` and of a follower alike, writes through that one
connector; a follower whose pass failed has it made ready again before its next
(`forget`), for a centre that was restarted or restored meanwhile. A dry run's destination
is made ready inside each source's rolled-back transaction instead (`dry_destination`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from sqlalchemy import Connection, inspect
from sqlalchemy.engine import URL

from ..connector import Connector, connector_at
from ..dialects import backend_for
from ..engine import sqlite_path, to_url, where
from ..models.sync import SYNC_METADATA
from ..schema.copy_marker import refuse_unfinished_copy
from ..schema.detect import check_sqlite_file, read_revision
from ..store import Store, create_head_schema
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


def prepare_dest(dest: Connector, url: URL) -> None:
    """Create or upgrade the destination store (as `Store.open` does) and sync's own tables.

    A destination a sync prepared before (at head, sync's tables there, no unfinished copy)
    is known from one look and not opened again. `dest` is the destination's connector (held
    by a `Destination` for a sync or a follower)."""
    with dest.translated():  # a role refused: typed
        _prepare(dest, url)


def _prepare(dest: Connector, url: URL) -> None:
    from ..releases import HEAD
    from ..transfer import copy_in_progress

    with dest.snapshot() as conn:
        names = set(inspect(conn).get_table_names())
        ready = (
            SYNC_METADATA.tables.keys() <= names
            and "alembic_version" in names
            and read_revision(conn) == HEAD
            and not copy_in_progress(conn)
        )
    if ready:
        return

    with dest.released():
        Store.open(url).close()
    with dest.load() as conn:
        SYNC_METADATA.create_all(conn, checkfirst=True)
        backend_for(conn).keep_rules(conn)  # a sync table new here gets the roles' rules too


Ready = Callable[[Connection], None]
"""What makes the destination ready for a sync inside the transaction of one source's changes
(a dry run's, rolled back with them)."""


@contextmanager
def dry_destination(url: URL) -> Iterator[tuple[Connector, Ready, str | None]]:
    """The destination of a dry run: its connector, what makes it ready for a sync inside
    each source's transaction (which a dry run rolls back: never committed), and what a sync
    would first do to the destination, said for a person (None when it is ready).

    Each source's transaction first makes the destination what a sync makes it (a store
    built, upgraded to head, sync's tables added), then syncs the source into it, so a dry
    run's counts are a sync's own. A SQLite file that does not exist is not created: an
    empty store in memory stands for it."""
    from ..releases import HEAD
    from ..schema.detect import diagnose

    shown = where(url)
    path = sqlite_path(url)
    missing = path is not None and not path.exists()
    if path is not None:
        check_sqlite_file(path, missing=None)  # what is no file a store can be is refused
    with connector_at(to_url(":memory:") if missing else url) as central:
        with central.snapshot() as conn:
            names = set(inspect(conn).get_table_names())
            if names:
                refuse_unfinished_copy(conn, shown)
            before = read_revision(conn) if names else None
            found = diagnose(conn) if names and before != HEAD else None
        setup: str | None = None
        if missing or not names:
            state = "does not exist" if missing else "holds no store"
            setup = f"{shown} {state}: a sync would create it at revision {HEAD}"
        elif found is not None:
            then = " (after a backup)" if path is not None else ""
            setup = f"{shown}: {found.describe()}; a sync would upgrade it to revision {HEAD}{then}"
        elif not SYNC_METADATA.tables.keys() <= names:
            setup = f"{shown} was never synced into: a sync would add its own tables"

        def ready(dst: Connection) -> None:
            if missing or not names:
                create_head_schema(dst)
            elif found is not None:
                from ..schema.migrate import upgrade

                upgrade(url, backup=False, connection=dst)
            SYNC_METADATA.create_all(dst, checkfirst=True)

        with central.load(commit=False) as conn:  # what the sync refuses, before any source
            ready(conn)
        yield central, ready, setup
