"""Backends: one module per database family (`sqlite`, `postgresql`, each with the modules
named after it), chosen by name from a URL, engine or connection through the registry
(`registry`), which imports a backend's module only when a store of it is first met."""

from __future__ import annotations

from . import sql_constructs  # noqa: F401 - registers how each construct compiles
from .base import Backend
from .registry import backend_for, backend_named, backend_of

__all__ = ["Backend", "backend_for", "backend_named", "backend_of"]
