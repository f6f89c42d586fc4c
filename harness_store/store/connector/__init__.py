"""The connector: the one object holding a Store's DBAPI connections (see `base`)."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.engine import URL

from ...dialects import Backend
from .base import BlockState, Connector, Work
from .pooled import PooledConnector
from .sqlite import SQLiteConnector

__all__ = [
    "BlockState",
    "Connector",
    "PooledConnector",
    "SQLiteConnector",
    "Work",
    "connector_for",
]


def connector_for(
    engine: Engine, backend: Backend, url: URL, *, busy_timeout: float | None = None
) -> Connector:
    """The connector for `backend`'s way of holding connections: one kept connection, or a
    pool with a kept set."""
    kind = SQLiteConnector if backend.one_connection else PooledConnector
    return kind(engine, backend, url, busy_timeout=busy_timeout)
