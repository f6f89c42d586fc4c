"""A run's provider calls as its spans read them: a page at a time in row order, held by step
only until their step's spans are built (`CallsAhead`), their usage and priced cost."""

from __future__ import annotations

from collections.abc import Callable

from ..records import Usage
from ..store.trace_export import SpanProviderCall
from .times import stamp_ns

CALL_PAGE = 2000
"""Provider calls of a run read at a time."""

CallPages = Callable[[int, int], list[SpanProviderCall]]
"""A run's provider calls with ids above the first number, in row order, at most the second."""


class Cost:
    """A run's priced cost so far: the sum of its calls' prices, and how many had none."""

    def __init__(self) -> None:
        self.micros = 0
        self.unpriced = 0

    def add(self, priced: int | None) -> None:
        if priced is None:
            self.unpriced += 1
        else:
            self.micros += priced


def calls_in(calls: list[SpanProviderCall]) -> CallPages:
    """`calls` (a run's provider calls, already read, in row order) as pages."""

    def page(after: int, limit: int) -> list[SpanProviderCall]:
        return [c for c in calls if c.id > after][:limit]

    return page


def earliest(read: CallPages) -> int | None:
    """The earliest stamp among a run's provider calls, read a page at a time; None if none
    has one."""
    first: int | None = None
    after = 0
    while page := read(after, CALL_PAGE):
        for call in page:
            at = stamp_ns(call.at)
            if at is not None and (first is None or at < first):
                first = at
        after = page[-1].id
    return first


class CallsAhead:
    """A run's provider calls read a page at a time in row order, kept by step until their
    step comes (`waiting`): only those read ahead of the steps given out are held."""

    def __init__(self, read: CallPages, stamped: Callable[[int | None], None]) -> None:
        self.read = read
        self.stamped = stamped
        """Told each call's stamp as it is read (the run ends no earlier)."""
        self.after = 0
        self.done = False
        self.high: int | None = None
        """The last step whose calls `through` has handed out."""
        self.waiting: dict[int, list[SpanProviderCall]] = {}
        self.top: int | None = None
        """The highest step of a call read so far."""

    def through(self, step: int | None) -> list[SpanProviderCall]:
        """Read on until a call of a step after `step` (None: to the end); the calls of the
        steps after the last `through`'s up to `step`, for the clock. A call read after its
        step's window (a store whose calls are out of step order) still goes out with a
        later step of its number, or after the steps."""
        while not self.done and not self._past(step):
            page = self.read(self.after, CALL_PAGE)
            if len(page) < CALL_PAGE:
                self.done = True
            if page:
                self.after = page[-1].id
            for call in page:
                self.stamped(stamp_ns(call.at))
                self.waiting.setdefault(call.step, []).append(call)
                if self.top is None or call.step > self.top:
                    self.top = call.step
        low = self.high
        fresh = [
            call
            for number, calls in self.waiting.items()
            if (low is None or number > low) and (step is None or number <= step)
            for call in calls
        ]
        if step is not None:
            self.high = step if low is None else max(low, step)
        return fresh

    def _past(self, step: int | None) -> bool:
        return step is not None and self.top is not None and self.top > step


def usage_of(call: SpanProviderCall) -> Usage:
    """A provider call's usage as the price table reads it."""
    return Usage(
        prompt_tokens=call.prompt_tokens or 0,
        completion_tokens=call.completion_tokens or 0,
        total_tokens=call.total_tokens or 0,
        cache_read_tokens=call.cache_read_tokens or 0,
        cache_write_tokens=call.cache_write_tokens or 0,
        reasoning_tokens=call.reasoning_tokens or 0,
        server_tool_requests=call.server_tool_requests or 0,
    )
