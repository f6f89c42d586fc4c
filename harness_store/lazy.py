"""Names a package imports on first use, so importing it stays cheap (the command's start-up,
`alembic` loading the chain) until a caller reaches for the name."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package`: `where[name]`, a submodule of it, is imported when
    `name` is first asked for, and the value is kept in the package's namespace after."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
