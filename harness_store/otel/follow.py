"""Shipping runs as they finish (`follow`): the store read every interval, each run sent once,
when it is first seen finished, through the export's `Exporter`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from ..errors import StoreConnectionError
from ..records import PriceTable
from ..store import Store
from ..store.trace_export import RUN_PAGE, SpanRun
from .exporter import Exporter, finished, running_runs
from .sender import BATCH, MAX_REQUEST_BYTES, ExportReport
from .transport import MAX_WAIT

GAP_PATIENCE = 600.0
"""Seconds a follow keeps looking for a run id it skipped (on PostgreSQL, a run's id can be
taken before a lower one's transaction commits); after that the id counts as never used."""

GAP_LIMIT = 10_000
"""Skipped run ids a follow keeps looking for at most."""


class Follower:
    """The follow loop's state: the highest run id seen, the runs seen unfinished (running or
    paused) and not yet shipped, and run ids skipped over that may still appear. A run is
    shipped once, when it is first seen finished (completed or failed): a run above the
    highest id when it appears, a run seen unfinished when its status becomes final; a paused
    run stays watched until it resumes and finishes. So every run that finishes is shipped
    exactly once, with all its rows, whatever events (none, or many) its writer recorded."""

    def __init__(
        self, exporter: Exporter, after: int, running: Sequence[int],
        on_send: Callable[[ExportReport], None] | None,
    ) -> None:  # fmt: skip
        self.exporter = exporter
        self.on_send = on_send
        self.high = after
        self.live: set[int] = set(running)
        self.gaps: dict[int, float] = {}

    def _ship(self, run: SpanRun) -> None:
        if not finished(run):
            self.live.add(run.id)
            return
        self.live.discard(run.id)
        self.exporter.send_runs(iter([run]))
        if self.on_send is not None:
            self.on_send(self.exporter.report)

    def poll(self) -> None:
        """One look at the store: ship what finished since the last look. The watched runs
        are read after each page of newer runs and shipped before it, so a run that finished
        before a newer one started goes out ahead of it."""
        now = time.monotonic()
        while True:
            page = self._read(after=self.high)
            for run in page:
                if run.id - self.high > 1 and len(self.gaps) < GAP_LIMIT:
                    for skipped in range(self.high + 1, min(run.id, self.high + GAP_LIMIT)):
                        self.gaps[skipped] = now
                self.high = run.id
            self._ship_watched()
            for run in page:
                self._ship(run)
            if len(page) < RUN_PAGE:
                break
        for skipped, since in list(self.gaps.items()):
            if now - since > GAP_PATIENCE:
                del self.gaps[skipped]
        self.exporter.report.last_run_id = self.high

    def _ship_watched(self) -> None:
        """Read the runs seen unfinished and the skipped ids; ship those now finished."""
        watched = sorted(self.live | set(self.gaps))
        seen: set[int] = set()
        for i in range(0, len(watched), RUN_PAGE):
            for run in self._read(run_ids=watched[i : i + RUN_PAGE]):
                seen.add(run.id)
                self.gaps.pop(run.id, None)
                self._ship(run)
        self.live &= seen  # a run pruned meanwhile is no longer watched

    def _read(self, *, after: int = 0, run_ids: list[int] | None = None) -> list[SpanRun]:
        """The exporter's `runs`, read once more on a new connection when the first read's
        connection is lost (a terminated session); lost again, the error ends the follow."""
        try:
            return self.exporter.reads.runs(after=after, run_ids=run_ids)
        except StoreConnectionError:  # a read: safe to repeat
            return self.exporter.reads.runs(after=after, run_ids=run_ids)


def follow(
    store: Store,
    *,
    endpoint: str,
    after: int | None = None,
    running: Sequence[int] = (),
    headers: Mapping[str, str] | None = None,
    include_content: bool = False,
    prices: PriceTable | None = None,
    identity: str | None = None,
    project: str = "io-harness",
    timeout: float = 10.0,
    interval: float = 0.5,
    stop: threading.Event | None = None,
    on_send: Callable[[ExportReport], None] | None = None,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    max_wait: float = MAX_WAIT,
) -> ExportReport:
    """Ship runs as they finish, until `stop` is set: each run above the id `after` once it
    is completed or failed, and each run of `running` (runs already known to be unfinished,
    as an export's `running`) once it finishes; a paused run is shipped when it has resumed
    and finished. `after` None: from now, the store's newest run, with every run running or
    paused now. Every run that finishes is shipped exactly once, whether or not its writer
    recorded events, and a run that finished before a newer one started is shipped ahead of
    it. The store is read every `interval` seconds; memory holds only the runs seen
    unfinished. `on_send` is called after each run shipped. Requests are bounded and
    pushed-back batches sent again as `export`'s (`max_request_bytes`, `max_wait`)."""
    exporter = Exporter(
        store, endpoint=endpoint, headers=headers, include_content=include_content,
        prices=prices, identity=identity, project=project, timeout=timeout, batch=BATCH,
        max_request_bytes=max_request_bytes, max_wait=max_wait,
    )  # fmt: skip
    if after is None:
        after = store.last_run() or 0
        running = [*running, *running_runs(store, after)]
    follower = Follower(exporter, after, running, on_send)
    stop = stop or threading.Event()
    try:
        while not stop.is_set():
            follower.poll()
            stop.wait(interval)
        return exporter.report
    finally:
        exporter.close()
