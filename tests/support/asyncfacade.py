"""`BlockingAsyncStore`: an `AsyncStore` driven from sync code, so the Store test suite runs
against AsyncStore unchanged (conftest's `store_api` parameter).

One event loop runs in a background thread. Each calling thread has its own
`contextvars.Context`, and every coroutine it calls becomes a task created with that context:
so a thread's `with store.transaction():` is its own task-local block across the calls that
follow, as a thread's block is on a Store, and threads calling at once are concurrent tasks.
Generators become sync generators pulling from the async iterator; one abandoned is closed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, Self

from sqlalchemy import Engine

from harness_store import AsyncStore
from harness_store.aio import AsyncLease
from harness_store.aio.methods import WRITE
from harness_store.engine import make_engine


class Loop:
    """An event loop on a daemon thread, running coroutines for calling threads."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._contexts = threading.local()

    def context(self) -> contextvars.Context:
        """The calling thread's context (one per thread, kept across calls)."""
        found: contextvars.Context | None = getattr(self._contexts, "value", None)
        if found is None:
            found = self._contexts.value = contextvars.Context()
        return found

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` as a task in the calling thread's context; wait for its outcome."""
        context = self.context()
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def finish(task: asyncio.Task[Any]) -> None:
            if task.cancelled():
                done.cancel()
            elif task.exception() is not None:
                done.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                done.set_result(task.result())

        def start() -> None:
            self.loop.create_task(coro, context=context).add_done_callback(finish)

        self.loop.call_soon_threadsafe(start)
        return done.result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


_LOOP: Loop | None = None
_LOOP_LOCK = threading.Lock()


def shared_loop() -> Loop:
    """The process's one background loop (started on first use)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = Loop()
        return _LOOP


class BlockingAsyncStore:
    """Store's sync API over an `AsyncStore` (see the module)."""

    def __init__(self, inner: AsyncStore, loop: Loop) -> None:
        self._inner = inner
        self._loop = loop
        self._engine: Engine | None = None

    @classmethod
    def open(cls, target: Any, **kw: Any) -> Self:
        loop = shared_loop()
        return cls(loop.run(AsyncStore.open(target, **kw)), loop)

    @classmethod
    def memory(cls, **kw: Any) -> Self:
        loop = shared_loop()
        return cls(loop.run(AsyncStore.memory(**kw)), loop)

    @property
    def inner(self) -> AsyncStore:
        return self._inner

    @property
    def engine(self) -> Engine:
        """A sync engine on the store, for tests that read and write rows themselves (the
        AsyncStore's own engine is an `AsyncEngine` on PostgreSQL)."""
        if isinstance(self._inner.engine, Engine):
            return self._inner.engine
        if self._engine is None:
            self._engine = make_engine(self._inner.url)
        return self._engine

    @property
    def write_engine(self) -> Engine:
        if isinstance(self._inner.write_engine, Engine):
            return self._inner.write_engine
        return self.engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        self._loop.run(self._inner.close())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        block = self._inner.transaction()
        self._loop.run(block.__aenter__())
        try:
            yield
        except BaseException as exc:
            self._loop.run(block.__aexit__(type(exc), exc, exc.__traceback__))
            raise
        self._loop.run(block.__aexit__(None, None, None))

    def _pull(self, iterator: Any) -> Iterator[Any]:
        try:
            while True:
                try:
                    item = self._loop.run(iterator.__anext__())
                except StopAsyncIteration:
                    return
                yield item
        finally:
            self._loop.run(iterator.aclose())

    def __setattr__(self, name: str, value: Any) -> None:
        """A test replacing a public method (to count its calls) replaces the AsyncStore's, so
        the facade's own calls of it go through the replacement; it runs on a thread, as it
        calls back into this facade."""
        if name.startswith("_") or not callable(value):
            super().__setattr__(name, value)
            return

        async def replaced(*args: Any, **kw: Any) -> Any:
            return await asyncio.to_thread(value, *args, **kw)

        setattr(self._inner, name, replaced)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name, None)
        if attr is None and not hasattr(self._inner, name):
            # the Store's internals, for white-box tests: methods run where the Store's calls do
            found = getattr(self._inner.store, name)
            if not callable(found):
                return found
            runner = self._inner._runner

            def internal(*args: Any, **kw: Any) -> Any:
                return self._loop.run(runner.call(WRITE, name, args, kw))

            return internal
        if inspect.isasyncgenfunction(attr):

            def pull(*args: Any, **kw: Any) -> Iterator[Any]:
                return self._pull(attr(*args, **kw))

            return pull
        if inspect.iscoroutinefunction(attr):

            def call(*args: Any, **kw: Any) -> Any:
                found = self._loop.run(attr(*args, **kw))
                return BlockingLease(found, self._loop) if isinstance(found, AsyncLease) else found

            return call
        return attr


class BlockingLease:
    """`Lease`'s sync API over an `AsyncLease`."""

    def __init__(self, inner: AsyncLease, loop: Loop) -> None:
        self._inner = inner
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def renew(self) -> None:
        self._loop.run(self._inner.renew())

    def release(self) -> None:
        self._loop.run(self._inner.release())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.run(self._inner.__aexit__(*exc))
