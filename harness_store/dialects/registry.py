"""The backends by name: which module holds each, and the one instance of each, made when a
store of that backend is first met.

As Alembic's `DefaultImpl` subclasses register themselves under their dialect's name and
`DefaultImpl.get_by_dialect` finds them, each `Backend` subclass registers itself under its
`name` when its module is imported (`Backend.__init_subclass__`), and `backend_named` finds it
from a URL's, an engine's or a connection's dialect name. Neutral code asks the backend it is
given for what differs (`Backend`'s methods) and names no backend's module: only this table
does, so a process that never meets PostgreSQL never imports its module.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from ..errors import SchemaError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine
    from sqlalchemy.engine import URL

    from .base import Backend

MODULES: dict[str, str] = {"sqlite": ".sqlite", "postgresql": ".postgresql"}
"""Each supported SQLAlchemy backend name -> the module (relative to `dialects`) whose
`Backend` subclass registers under it."""

_classes: dict[str, type[Backend]] = {}
"""The `Backend` subclasses registered so far, by name."""

_made: dict[str, Backend] = {}
"""The one instance of each backend, by name, made on first use."""


def register(backend: type[Backend]) -> None:
    """Register a `Backend` subclass under its `name` (called by `Backend.__init_subclass__`
    for every subclass that sets one)."""
    _classes[backend.name] = backend


def backend_named(dialect_name: str) -> Backend:
    """The backend for a SQLAlchemy dialect (backend) name, its module imported on first use;
    `SchemaError` for a backend the package does not support."""
    made = _made.get(dialect_name)
    if made is not None:
        return made
    module = MODULES.get(dialect_name)
    if module is None:
        raise SchemaError(f"harness_store supports SQLite and PostgreSQL, not {dialect_name!r}")
    if dialect_name not in _classes:
        import_module(module, __package__)
    return _made.setdefault(dialect_name, _classes[dialect_name]())


def backend_for(bind: Engine | Connection) -> Backend:
    """The backend for an engine or connection."""
    return backend_named(bind.dialect.name)


def backend_of(url: URL) -> Backend:
    """The backend for a store's URL."""
    return backend_named(url.get_backend_name())
