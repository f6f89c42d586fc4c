"""The durable event stream (io-harness 0.33): events appended as upstream's JSON with a
globally increasing cursor, read back after a cursor, and — Python's addition — followed live
from another process (`Store.follow`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Select, func, insert, select

from .. import models as m
from ..dialects.sql_constructs import DrivingJoin
from ..errors import InvalidValueError, StoreConnectionError, StoreError
from ..formats import i64, is_int, u32
from ..formats import text as check_text
from ..records import RunEvent
from .agents import tree_ids
from .marks import pages, reads, writes
from .release_tables import OlderStoreMixin

HEAD_FIELDS = ("run_id", "step", "depth", "event")
"""The keys of an event's JSON that are not its kind's own fields (`event` is the kind)."""

FOLLOW_BATCH = 500
"""Most events `follow` reads per poll."""


def event_json(event: RunEvent) -> str:
    """An event as upstream serialises it: `run_id`, `step`, `depth`, the `event` tag, then the
    kind's fields (flattened), compact, non-ASCII kept."""
    clash = set(event.fields) & set(HEAD_FIELDS)
    if clash:
        raise InvalidValueError(f"an event's fields cannot be named {sorted(clash)}")
    document: dict[str, Any] = {
        "run_id": i64(event.run_id, "run_id"),
        "step": u32(event.step, "step"),
        "depth": u32(event.depth, "depth"),
        "event": check_text(event.kind, "kind"),
        **event.fields,
    }
    try:
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"the event cannot be stored as JSON: {exc}") from None


def parse_event(cursor: int, raw: str) -> RunEvent:
    """A stored event read back from its JSON, as upstream reads it (not from the columns)."""
    try:
        document = json.loads(raw)
        fields = {k: v for k, v in document.items() if k not in HEAD_FIELDS}
        return RunEvent(
            int(document["run_id"]),
            int(document["step"]),
            str(document["event"]),
            fields,
            int(document.get("depth", 0)),
        )
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise StoreError(f"event {cursor} is not an event this release can read: {exc}") from None


def tree_events_query(root: int, cursor: int, limit: int) -> Select[tuple[int, str]]:
    """The statement `tree_events_since` runs (a function so the plan test explains this very
    statement): the tree's ids first, then each run's events from the (run_id, id) index."""
    e = m.table_of(m.RunEvent)
    tree = tree_ids(root)
    return (
        select(e.c.id, e.c.json)
        .select_from(DrivingJoin(tree, e, e.c.run_id == tree.c.id))
        .where(e.c.id > cursor)
        .order_by(e.c.id)
        .limit(limit)
    )


class StreamMixin(OlderStoreMixin):
    """`put_event`, `event_cursor`, `events_since`, and `follow`."""

    @writes
    def put_event(self, event: RunEvent) -> int:
        """Append one event to the durable stream; return its cursor (ids rise across every
        run, so one cursor serves a run's stream and a tree's)."""
        statement = (
            insert(m.RunEvent)
            .values(
                run_id=event.run_id,
                step=event.step,
                depth=event.depth,
                kind=event.kind,
                json=event_json(event),
            )
            .returning(m.RunEvent.id)
        )
        with self._write() as conn:
            return int(conn.execute(statement).scalar_one())

    @reads
    def event_cursor(self) -> int:
        """The highest cursor the stream has reached, over every run (0 when empty): where a
        reader that wants "from now on" starts."""
        if self._lacks("run_events"):
            return 0
        return int(self._scalar(select(func.coalesce(func.max(m.RunEvent.id), 0))))

    @reads
    def events_since(self, run_id: int, cursor: int, limit: int) -> list[tuple[int, RunEvent]]:
        """One run's events after `cursor` (exclusive), oldest first, at most `limit`: one seek
        on the (run_id, id) index."""
        if self._lacks("run_events"):
            return []
        e = m.RunEvent
        statement = (
            select(e.id, e.json)
            .where(e.run_id == run_id, e.id > cursor)
            .order_by(e.id)
            .limit(_limit(limit))
        )
        return self._rows(statement, lambda i, raw: (int(i), parse_event(int(i), raw)))

    @reads
    def tree_events_since(self, root: int, cursor: int, limit: int) -> list[tuple[int, RunEvent]]:
        """Every event after `cursor` (exclusive) from any run of the tree rooted at `root`,
        oldest first, at most `limit`: the tree's stream interleaved as its agents wrote it
        (cursors rise across runs); each event's `run_id` and `depth` say whose it is. Walks
        the tree, then seeks each run's events on the (run_id, id) index, so other trees'
        events are never read."""
        if self._lacks("run_events"):
            return []
        statement = tree_events_query(root, cursor, _limit(limit))
        return self._rows(statement, lambda i, raw: (int(i), parse_event(int(i), raw)))

    @reads
    def events_after(
        self, cursor: int, limit: int, run_id: int | None = None
    ) -> list[tuple[int, RunEvent]]:
        """Events after `cursor` of every run (or of `run_id`), oldest first, at most `limit`
        (beyond upstream, whose `events_since` reads one run): one poll of `follow`."""
        if self._lacks("run_events"):
            return []
        e = m.RunEvent
        statement = select(e.id, e.json).where(e.id > cursor).order_by(e.id).limit(_limit(limit))
        if run_id is not None:
            statement = statement.where(e.run_id == run_id)
        return self._rows(statement, lambda i, raw: (int(i), parse_event(int(i), raw)))

    @pages(None)
    def follow(
        self,
        cursor: int | None = None,
        *,
        run_id: int | None = None,
        interval: float = 0.5,
        batch: int = FOLLOW_BATCH,
        stop: threading.Event | None = None,
    ) -> Iterator[tuple[int, RunEvent]]:
        """Yield `(cursor, event)` as events are written — by this process or any other — for
        every run, or for `run_id` only. Starts after `cursor` (0: the whole backlog; None: from
        now, the current `event_cursor`), so a reader that saves the last cursor it handled
        resumes exactly there. Polls one indexed query every `interval` seconds while idle (no
        busy loop; each poll is its own short read, so no lock or snapshot is held between
        polls) and drains a backlog in `batch`-sized reads without waiting. Ends when the
        caller stops iterating (`break`, `close()`), or when `stop` is set — the wait wakes at
        once. A poll whose connection to the server is lost (a terminated session) is made
        once more on a new connection; lost again, `StoreConnectionError` ends the follow."""
        limit = follow_limit(interval, batch)
        position = self.event_cursor() if cursor is None else cursor
        while stop is None or not stop.is_set():
            try:
                rows = self.events_after(position, limit, run_id)
            except StoreConnectionError:
                rows = self.events_after(position, limit, run_id)  # a read: safe to repeat
            for row in rows:
                yield row
                position = row[0]
            if len(rows) == limit:
                continue  # a backlog: read on without sleeping
            if stop is not None:
                stop.wait(interval)
            else:
                time.sleep(interval)


def follow_limit(interval: float, batch: int) -> int:
    """`follow`'s arguments checked (by `Store.follow` and `AsyncStore.follow` alike): the
    read size of one poll."""
    if not (isinstance(interval, int | float) and interval > 0):
        raise InvalidValueError(f"interval must be a positive number of seconds, not {interval!r}")
    return _limit(batch)


def _limit(limit: int) -> int:
    if not is_int(limit) or limit < 0:
        raise InvalidValueError(f"limit must be a non-negative number of events, not {limit!r}")
    return min(limit, 2**63 - 1)
