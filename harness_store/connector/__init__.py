"""The connector: the one holder of the package's DBAPI connections, and its one way in
(see `base`): a Store's, and outside any Store sync's destination, a copy's target, the
upgrade's (`lend`) and the command's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.engine import URL

from ..dialects import Backend, backend_named
from ..engine import make_engine, to_url
from ..engine import read_only_url as read_only_url_of
from ..targets import TargetLike
from .base import Connector, Work
from .open_block import BlockState
from .pooled import PooledConnector
from .sqlite import SQLiteConnector
from .translation import translated
from .upgrade_connection import Lent, lend

__all__ = [
    "BlockState",
    "Connector",
    "Lent",
    "PooledConnector",
    "SQLiteConnector",
    "Work",
    "connector_at",
    "connector_for",
    "lend",
    "translated",
]


def connector_for(
    engine: Engine, backend: Backend, url: URL, *, busy_timeout: float | None = None
) -> Connector:
    """The connector for `backend`'s way of holding connections: one kept connection, or a
    pool with a kept set."""
    kind = SQLiteConnector if backend.one_connection else PooledConnector
    return kind(engine, backend, url, busy_timeout=busy_timeout)


@contextmanager
def connector_at(target: TargetLike, *, read_only: bool = False) -> Iterator[Connector]:
    """A connector of its own for the store at `target`, outside any Store (sync's
    destination, a copy's target, the command's look), closed after the body. Its writes
    take the writers' turn as a Store's do. `read_only`: opened so that no statement can
    write (a still SQLite file read `immutable=1`, as the read-only open does)."""
    url = read_only_url_of(target) if read_only else to_url(target)
    engine = make_engine(url)
    try:
        connector = connector_for(engine, backend_named(url.get_backend_name()), url)
    except BaseException:
        engine.dispose()
        raise
    try:
        yield connector
    finally:
        connector.close()
