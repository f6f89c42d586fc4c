"""The block a context has open on a connector (`Connector.transaction()`): its connection
and whether it may write, context-local so that each thread, and each asyncio task of an
`AsyncStore`, has its own."""

from __future__ import annotations

from contextvars import ContextVar

from sqlalchemy import Connection

BlockState = tuple[Connection | None, bool]
"""What a context has open on a connector: the block's connection (None for none), and
whether it may write."""


class ActiveBlock:
    """The block this thread — or asyncio task — has open on this connector, if any.

    Context-local rather than thread-local: a new thread starts with an empty context (so
    each thread still has its own), and each asyncio task runs in its own copy, so the tasks
    of an `AsyncStore` that share the event loop's thread never join each other's block."""

    __slots__ = ("_var",)

    def __init__(self) -> None:
        self._var: ContextVar[BlockState] = ContextVar(
            "harness_store_active", default=(None, False)
        )

    @property
    def conn(self) -> Connection | None:
        return self._var.get()[0]

    @property
    def write(self) -> bool:
        return self._var.get()[1]

    def get(self) -> BlockState:
        return self._var.get()

    def set(self, conn: Connection | None, write: bool) -> None:
        """Open (`conn`) or end (None) this context's transaction."""
        self._var.set((conn, write))
