"""A run's span events a page at a time: the first page on the run's own span, each later
one a `harness.events` span under it, so no span (and no request) grows with the run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext

if TYPE_CHECKING:
    from .mapping import RunSpans

EVENTS_PER_SPAN = 1000
"""Events one span carries at most: a run's first this many are its own span's, each further
page a `harness.events` span under it, so no span (and no request) grows with the run."""

EVENT_BYTES_PER_SPAN = 1024 * 1024
"""About how many bytes one span's events take at most, encoded (with `include_content`, a
step's prompt and result make them large): a page ends when it reaches this (or half the
export's request size, if less), or holds `EVENTS_PER_SPAN` events."""


def _encoded_size(event: Event) -> int:
    """About the bytes an event takes in a request, erring high: its time and name, and each
    attribute's key and value with protobuf's tags and lengths."""
    size = 16 + len(event.name)
    for key, value in (event.attributes or {}).items():
        size += len(key) + (len(value.encode()) + 12 if isinstance(value, str) else 20)
    return size


class EventPages:
    """A run's span events, a page at a time: the first page stays for the run's own span
    (`first`), each later one is given out as a `harness.events` span as soon as it is full,
    so a run's events are never held whole."""

    def __init__(self, spans: RunSpans, trace_id: int, parent: SpanContext, run_id: int) -> None:
        self.spans = spans
        self.trace_id = trace_id
        self.parent = parent
        self.run_id = run_id
        self.first: list[Event] = []
        self.page: list[Event] = []
        self.size = 0
        self.pages = 0

    def add(self, event: Event) -> Iterator[ReadableSpan]:
        """Take `event`; yields the page it filled, if any, as a span."""
        self.page.append(event)
        self.size += _encoded_size(event)
        if len(self.page) >= EVENTS_PER_SPAN or self.size >= self.spans.options.event_bytes:
            yield from self._turn()

    def close(self) -> Iterator[ReadableSpan]:
        """The last page's span, if there are pages beyond the first."""
        if self.page:
            yield from self._turn()

    def _turn(self) -> Iterator[ReadableSpan]:
        page, self.page, self.size = self.page, [], 0
        self.pages += 1
        if self.pages == 1:
            self.first = page
            return
        yield self.spans.events_span(self.trace_id, self.parent, self.run_id, self.pages, page)
