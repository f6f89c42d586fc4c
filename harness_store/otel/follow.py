"""Shipping runs as they finish (`follow`): the store read every interval, each run sent once,
when it is first seen finished, through the export's `Exporter`; with `runs` or `since`, only
the runs an export with them selects (the trees under `runs`, the runs started or finished
at or after `since`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from ..errors import StoreConnectionError
from ..records import PriceTable
from ..store import Store
from ..store.trace_export import RUN_PAGE, SpanRun
from .exporter import Exporter, finished, running_runs, since_stamp, trees_under
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
    exactly once, with all its rows, whatever events (none, or many) its writer recorded.

    With `trees` (the runs of the trees `--run` selects, grown by each child of theirs seen),
    a run outside them is neither watched nor shipped; with `since`, a finished run is
    shipped only when it started or finished at or after it (read as an export reads it)."""

    def __init__(
        self, exporter: Exporter, after: int, running: Sequence[int],
        on_send: Callable[[ExportReport], None] | None,
        trees: set[int] | None = None, since: str | None = None,
    ) -> None:  # fmt: skip
        self.exporter = exporter
        self.on_send = on_send
        self.high = after
        self.trees = trees
        self.since = since
        self.live: set[int] = {r for r in running if trees is None or r in trees}
        self.gaps: dict[int, float] = {}

    def _selected(self, run: SpanRun) -> bool:
        """Whether `run` is in the followed trees (always, with none): it is one of their
        runs, or a descendant of one, found through its parents (a child is added)."""
        trees = self.trees
        if trees is None or run.id in trees:
            return True
        chain = [run.id]
        parent = run.parent_run_id
        while parent is not None and parent not in trees:
            above = self.exporter.reads.run(parent)
            if above is None:
                return False
            chain.append(above.id)
            parent = above.parent_run_id
        if parent is None:
            return False
        trees.update(chain)
        return True

    def _in_window(self, runs: list[SpanRun]) -> set[int]:
        """The ids of the finished `runs` within `since` (all of them without one), read in
        one statement as an export selects them."""
        done = [run.id for run in runs if finished(run)]
        if self.since is None or not done:
            return set(done)
        return {run.id for run in self._read(run_ids=done, since=self.since)}

    def _ship(self, run: SpanRun, window: set[int]) -> None:
        if not self._selected(run):
            self.live.discard(run.id)
            return
        if not finished(run):
            self.live.add(run.id)
            return
        self.live.discard(run.id)
        if run.id not in window:
            return
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
            window = self._in_window(page)
            for run in page:
                self._ship(run, window)
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
            page = self._read(run_ids=watched[i : i + RUN_PAGE])
            window = self._in_window(page)
            for run in page:
                seen.add(run.id)
                self.gaps.pop(run.id, None)
                self._ship(run, window)
        self.live &= seen  # a run pruned meanwhile is no longer watched

    def _read(
        self, *, after: int = 0, run_ids: list[int] | None = None, since: str | None = None
    ) -> list[SpanRun]:
        """The exporter's `runs`, read once more on a new connection when the first read's
        connection is lost (a terminated session); lost again, the error ends the follow."""
        try:
            return self.exporter.reads.runs(after=after, run_ids=run_ids, since=since)
        except StoreConnectionError:  # a read: safe to repeat
            return self.exporter.reads.runs(after=after, run_ids=run_ids, since=since)


def follow(
    store: Store,
    *,
    endpoint: str,
    after: int | None = None,
    running: Sequence[int] = (),
    runs: Sequence[int] | None = None,
    since: str | None = None,
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
    paused now. `runs` and `since` select as `export`'s do: only the runs of the trees under
    `runs` (and the children those trees grow meanwhile), only the runs started or finished
    at or after `since`. Every run that finishes is shipped exactly once, whether or not its
    writer recorded events, and a run that finished before a newer one started is shipped
    ahead of it. The store is read every `interval` seconds; memory holds only the runs seen
    unfinished (and, with `runs`, the ids of their trees). `on_send` is called after each run
    shipped. Requests are bounded and pushed-back batches sent again as `export`'s
    (`max_request_bytes`, `max_wait`)."""
    stamp = since_stamp(since) if since is not None else None
    exporter = Exporter(
        store, endpoint=endpoint, headers=headers, include_content=include_content,
        prices=prices, identity=identity, project=project, timeout=timeout, batch=BATCH,
        max_request_bytes=max_request_bytes, max_wait=max_wait,
    )  # fmt: skip
    try:
        trees = None if runs is None else trees_under(exporter.reads, store, runs)
        if after is None:
            after = store.last_run() or 0
            running = [*running, *running_runs(store, after, trees)]
        follower = Follower(exporter, after, running, on_send, trees, stamp)
        stop = stop or threading.Event()
        while not stop.is_set():
            follower.poll()
            stop.wait(interval)
        return exporter.report
    finally:
        exporter.close()
