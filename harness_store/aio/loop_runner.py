"""`GreenletRunner`: how an `AsyncStore` on PostgreSQL runs the sync Store's code on the
event loop, each call in a greenlet (`greenlets`: parked between calls and reused, not one made
per call) whose awaits the calling task awaits — no thread per call. The hot paths
(`run_driver`, `driver_read`) run on the connector's kept connections, which there are
psycopg's own `AsyncConnection`s awaited straight from the greenlet: one switch to the loop and
back per round trip. The rest goes through SQLAlchemy's asyncio engine (its `sync_engine` is
the Store's engine), whose adapter awaits the same way.

A cancelled call unwinds its transaction, which the database rolls back whole. A loop closed
while a block is open never runs its task again: the runner holds the open blocks itself, and
the first call from another loop, or `close()`, rolls back those of closed loops (`_adopt`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from itertools import islice
from typing import TYPE_CHECKING, Any

from ..errors import LoopClosedError
from ..store.base import block_state, restore_block_state

if TYPE_CHECKING:
    from ..connector import BlockState
    from ..store import Store


class GreenletRunner:
    """Runs Store calls on the event loop over SQLAlchemy's asyncio engine (see the module)."""

    def __init__(self, store: Store, engine: Any) -> None:
        self.store = store
        self.async_engine = engine
        self.engine = engine
        self.write_engine = engine
        from .greenlets import Greenlets  # greenlet comes with the PostgreSQL extra

        self._greenlets = Greenlets()
        self._open: list[_LoopBlock] = []
        """The blocks open, outermost first (see `_adopt`)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the last call came from: only a call from another one looks further."""

    async def _here(self) -> None:
        if asyncio.get_running_loop() is not self._loop:
            await self._adopt()

    async def _adopt(self) -> None:
        """On a call from a loop other than the last one's: roll back, innermost first, every
        block whose loop was closed while it was open, on this loop (its connection is idle in
        its transaction: the loop's task never runs again to end it), and give the connection
        back; one that cannot be rolled back is dropped, and the server rolls it back."""
        self._loop = asyncio.get_running_loop()
        await self._greenlets.recover()
        orphans = [each for each in reversed(self._open) if each.loop.is_closed()]
        for orphan in orphans:
            orphan.ended = True
            with contextlib.suppress(ValueError):
                self._open.remove(orphan)
        for orphan in orphans:
            if not orphan.entered:
                continue
            end = functools.partial(
                orphan.block.__exit__, LoopClosedError, LoopClosedError("closed loop"), None
            )
            with contextlib.suppress(Exception):
                await self._greenlets.run(contextvars.Context().run, end)

    async def call(self, kind: str, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if asyncio.get_running_loop() is not self._loop:
            await self._adopt()
        return await self._greenlets.run(getattr(self.store, name), *args, **kw)

    async def iterate(
        self, kind: str, name: str, page: int, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> AsyncIterator[Any]:
        await self._here()
        iterator = getattr(self.store, name)(*args, **kw)
        try:
            while True:
                chunk = await self._greenlets.run(_page_of, iterator, page)
                for item in chunk:
                    yield item
                if len(chunk) < page:
                    return
        finally:
            iterator.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        await self._here()
        prior = block_state(self.store)
        block: AbstractContextManager[None] = self.store.transaction()
        opened = _LoopBlock(asyncio.get_running_loop(), block)
        self._open.append(opened)
        try:
            try:
                await self._greenlets.run(block.__enter__)
            except BaseException:
                opened.ended = True
                raise
            opened.entered = True
            try:
                yield
            except BaseException as exc:
                if isinstance(exc, GeneratorExit) or opened.ended:
                    # Finalized by the garbage collector, its loop closed: nothing may be
                    # awaited here. The block is ended by the next call, from a live loop.
                    self._loop = None
                    raise
                opened.ended = True
                await self._end(block, exc, prior)
                raise
            if opened.ended:
                raise LoopClosedError(
                    "this transaction() block was rolled back: the event loop it was opened "
                    "on was closed while it was open"
                )
            opened.ended = True
            await self._end(block, None, prior)
        finally:
            if opened.ended:
                with contextlib.suppress(ValueError):
                    self._open.remove(opened)

    async def _end(
        self,
        block: AbstractContextManager[None],
        exc: BaseException | None,
        prior: BlockState,
    ) -> None:
        """End the block in a task of its own, seen through even when this task is cancelled
        again meanwhile; then this task's context is put back as it was before the block."""
        kind = None if exc is None else type(exc)
        ending = asyncio.ensure_future(self._greenlets.run(block.__exit__, kind, exc, None))
        try:
            await asyncio.shield(ending)
        finally:
            restore_block_state(self.store, prior)

    async def aclose(self) -> None:
        try:
            await self._here()
            await self._greenlets.run(self.store.close)
            await self.async_engine.dispose()
        finally:
            self._greenlets.close()


class _LoopBlock:
    """A block open on the loop: the loop, the Store's block, whether it was entered, and
    whether its end is under way (or done)."""

    __slots__ = ("block", "ended", "entered", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, block: AbstractContextManager[None]):
        self.loop = loop
        self.block = block
        self.entered = False
        self.ended = False


def _page_of(iterator: Any, page: int) -> list[Any]:
    return list(islice(iterator, page))
