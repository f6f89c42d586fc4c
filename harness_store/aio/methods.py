"""Where each public `Store` method runs in an `AsyncStore`, read from the method's own mark.

Every public Store method is marked where it is defined (`store.marks`: `@reads`, `@writes`,
`@maintains`, `@local`, `@pages(...)`); this module only reads the marks. A read may run on a
SQLite store's read-only twin (so it never queues behind writes); a read that caches
(`@reads_caching`) too, its cache kept through the writer; a write runs on the writer,
where queued writes share a commit; maintenance runs on the writer alone. A public method
left unmarked is run as a write (safe, if slower for a read), and
`tests/aio/test_marks.py` fails until it is marked.
"""

from __future__ import annotations

import inspect

from ..store.marks import WRITE as WRITTEN
from ..store.marks import Access, access_of

NOT_MIRRORED = frozenset({"open", "memory", "close", "transaction"})
"""Written by hand on `AsyncStore`: the constructors (coroutine classmethods), `close`, and
`transaction` (an async context manager)."""

PROPERTIES = frozenset({"backend", "engine", "write_engine", "upgrade_report"})
"""Attributes read straight off the Store (no I/O)."""

READ = "read"
WRITE = "write"
MAINTENANCE = "maintenance"
"""A write that must run outside any transaction (`compact`): never committed together."""


def public_methods(cls: type) -> set[str]:
    """The public callables of `cls` (methods and classmethods, not properties)."""
    names = set()
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, property) or name in PROPERTIES:
            continue
        if callable(getattr(cls, name)):
            names.add(name)
    return names


def access(cls: type, name: str) -> Access:
    """The mark of `cls.name`; an unmarked method is a write."""
    return access_of(getattr(cls, name)) or WRITTEN


def unmarked(cls: type) -> set[str]:
    """Public methods of `cls` with no mark (run as writes until someone marks them)."""
    return {
        name for name in public_methods(cls) - NOT_MIRRORED if access_of(getattr(cls, name)) is None
    }
