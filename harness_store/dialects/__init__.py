"""Backends: one module per database family, chosen from a URL, engine or connection."""

from __future__ import annotations

from sqlalchemy import Connection, Engine

from ..errors import SchemaError
from .base import Backend
from .postgresql import PostgreSQLBackend
from .sqlite import SQLiteBackend

BACKENDS: dict[str, Backend] = {"sqlite": SQLiteBackend(), "postgresql": PostgreSQLBackend()}


def backend_named(dialect_name: str) -> Backend:
    """The backend for a SQLAlchemy dialect name."""
    try:
        return BACKENDS[dialect_name]
    except KeyError:
        raise SchemaError(
            f"harness_store supports SQLite and PostgreSQL, not {dialect_name!r}"
        ) from None


def backend_for(bind: Engine | Connection) -> Backend:
    """The backend for an engine or connection."""
    return backend_named(bind.dialect.name)


__all__ = ["Backend", "backend_for", "backend_named"]
