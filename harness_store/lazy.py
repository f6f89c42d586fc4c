"""Names a package imports on first use, so importing it stays cheap (the command's start-up,
`alembic` loading the chain) until a caller reaches for the name."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import import_module
from types import ModuleType


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

    shadowed = frozenset(name for name, module in where.items() if name == module)
    if shadowed:
        sys.modules[package].__class__ = _Package
        sys.modules[package].__dict__["_shadowed"] = shadowed
    return __getattr__


class _Package(ModuleType):
    """A package a public name of which is also the name of its module (`sync.follow`, the
    function, in `sync/follow.py`). Python binds a module on its package when it first loads
    it, which would hide the public name wherever the module was imported before the name
    was asked for; here the name is bound to the module's own value of it instead, as an
    eager `from .follow import follow` in the package would have left it."""

    def __setattr__(self, name: str, value: object) -> None:
        if (
            isinstance(value, ModuleType)
            and name in self.__dict__.get("_shadowed", ())
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            value = getattr(value, name)
        super().__setattr__(name, value)


@contextmanager
def collector_paused(*, freeze: bool) -> Iterator[None]:
    """The cyclic garbage collector paused for a burst of imports (SQLAlchemy, the models,
    the Store): the modules, classes and mappers they make live as long as the process, so
    the collections their allocations would set off, each walking the objects made so far,
    free nothing. `freeze`: then move every object made so far out of the collections for
    good (`gc.freeze`), which only a process that is all one command may do (the objects of
    a caller's own program would be kept from them too). The collector is left enabled or
    disabled as it was found."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()
