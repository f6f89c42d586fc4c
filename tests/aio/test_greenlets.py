"""`aio.greenlets.Greenlets`, the parked greenlets an `AsyncStore` on PostgreSQL runs its calls
in: what `greenlet_spawn` promised per call must hold for a greenlet that serves one call
after another (the Store's own behaviour through it is tests/aio/test_async_store.py's)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import weakref

import pytest
from sqlalchemy.util import await_only

from harness_store.aio.greenlets import Greenlets

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="none")


class Box:
    """Something a weak reference can follow."""


def _echo(box: Box) -> Box:
    return box


def test_a_greenlet_keeps_nothing_of_a_call_once_it_returns() -> None:
    async def main() -> None:
        greenlets = Greenlets()
        box = Box()
        gone = weakref.ref(box)
        assert await greenlets.run(_echo, box) is box
        del box
        gc.collect()
        assert gone() is None, "a parked greenlet still holds the call's argument or result"
        greenlets.close()

    asyncio.run(main())


def test_an_error_is_raised_to_the_caller_and_the_greenlet_serves_the_next_call() -> None:
    def fails() -> None:
        await_only(asyncio.sleep(0))
        raise LookupError("from inside")

    def answers() -> int:
        return await_only(asyncio.sleep(0, result=7))

    async def main() -> None:
        greenlets = Greenlets()
        with pytest.raises(LookupError, match="from inside"):
            await greenlets.run(fails)
        assert await greenlets.run(answers) == 7
        greenlets.close()

    asyncio.run(main())


def test_a_cancelled_call_unwinds_inside_its_greenlet_and_the_next_call_runs() -> None:
    unwound: list[str] = []

    def waits(started: asyncio.Event) -> None:
        started.set()
        try:
            await_only(asyncio.sleep(60))
        finally:
            await_only(asyncio.sleep(0))  # cleanup may await too, as a ROLLBACK does
            unwound.append("finally")

    async def main() -> None:
        greenlets = Greenlets()
        started = asyncio.Event()
        call = asyncio.ensure_future(greenlets.run(waits, started))
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert unwound == ["finally"]
        assert await greenlets.run(lambda: await_only(asyncio.sleep(0, result="next"))) == "next"
        greenlets.close()

    asyncio.run(main())


def test_a_call_runs_in_its_tasks_context_and_others_do_not_see_it() -> None:
    def mark(value: str) -> str:
        before = SEEN.get()
        SEEN.set(value)
        await_only(asyncio.sleep(0))
        return before

    async def task(greenlets: Greenlets, value: str) -> tuple[str, str]:
        before = await greenlets.run(mark, value)
        return before, SEEN.get()

    async def main() -> None:
        greenlets = Greenlets()
        first = await asyncio.create_task(task(greenlets, "first"))
        second = await asyncio.create_task(task(greenlets, "second"))
        assert first == ("none", "first")  # set inside the call, seen by its task after it
        assert second == ("none", "second")  # the reused greenlet brought nothing along
        assert SEEN.get() == "none"
        greenlets.close()

    asyncio.run(main())
