"""What each public `Store` method does to the database, marked where the method is defined.

One decorator line above each public method of the Store's mixins says how it reaches the
database: `@reads` (never writes: an `AsyncStore` on SQLite may run it on a read-only twin of
the file), `@reads_caching` (a read that also keeps what it computed, best effort, in a cache
table — the priced spend answers — through the Store's writable twin when it runs on a read-only
one: a read for where it runs, a write for what it leaves), `@writes` (may write: run on the
writer, where queued writes share a commit), `@maintains` (must run outside any transaction, as
`VACUUM`: never batched with others), `@local` (touches no database), and `@pages(size)` for a
generator of reads, pulled a page at a time (`size` is the name of the argument giving the page,
a fixed number, or None for one the facade writes natively). `scripts/generate_async.py` and the
`AsyncStore` runners read the mark; a public method without one fails `tests/aio/test_marks.py`.

A decorator only sets an attribute on the function and returns it: no wrapper, so the sync
call costs nothing more, and `store.arguments.checked_arguments` (whose wrapper copies the
function's attributes) keeps the mark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Kind = Literal["read", "write", "maintenance", "local"]

F = TypeVar("F", bound=Callable[..., Any])

MARK = "harness_store_access"
"""The function attribute holding a method's `Access`."""


@dataclass(frozen=True, slots=True)
class Access:
    """How a Store method reaches the database (see the module)."""

    kind: Kind
    page: str | int | None = None
    """For a generator (`pages`): the argument naming its page size, a fixed size, or
    None when the facade implements it itself."""
    iterates: bool = False
    caches: bool = False
    """For a read: whether it also writes a cache of what it computed (`reads_caching`)."""


READ = Access("read")
CACHING_READ = Access("read", caches=True)
WRITE = Access("write")
MAINTENANCE = Access("maintenance")
LOCAL = Access("local")


def _marked(function: F, access: Access) -> F:
    setattr(function, MARK, access)
    return function


def reads(function: F) -> F:
    """Mark a method that only reads."""
    return _marked(function, READ)


def reads_caching(function: F) -> F:
    """Mark a read that keeps what it computed in a cache table (best effort): it runs as a
    read, and may write the cache (see the module)."""
    return _marked(function, CACHING_READ)


def writes(function: F) -> F:
    """Mark a method that writes (or may)."""
    return _marked(function, WRITE)


def maintains(function: F) -> F:
    """Mark a method that must run outside any transaction (`TransactionOpenError` inside a
    block), so it is never committed together with other calls."""
    return _marked(function, MAINTENANCE)


def local(function: F) -> F:
    """Mark a method that touches no database."""
    return _marked(function, LOCAL)


def pages(size: str | int | None, *, caches: bool = False) -> Callable[[F], F]:
    """Mark a generator of reads, pulled `size` items a hop (see the module); `caches`, one
    that may keep what it computed, as `reads_caching`."""
    access = Access("read", size, iterates=True, caches=caches)

    def mark(function: F) -> F:
        return _marked(function, access)

    return mark


def access_of(method: object) -> Access | None:
    """The mark of a method (a function, bound method or `checked_arguments` wrapper), or
    None for one left unmarked."""
    found = getattr(method, MARK, None)
    return found if isinstance(found, Access) else None
