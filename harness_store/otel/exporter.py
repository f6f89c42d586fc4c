"""Sending a store's runs to an OTLP/HTTP receiver: the walk over the store (a page of runs at
a time, one run's rows at a time, so memory stays flat as the store grows) and each run's
spans handed to the sender (`sender`), which posts them in bounded requests. Shipping runs as
they finish is `follow`.

An export only reads: the store is opened by the caller, and nothing is written to it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata

from ..errors import RunNotFoundError
from ..records import PriceTable, RunStatus
from ..records.runs import FINISHED_STATUSES
from ..stamps import Stamp
from ..store import Store
from ..store.listings import Listings
from ..store.trace_export import RUN_PAGE, RunRows, SpanProviderCall, SpanRun, TraceExport
from .endpoint import shown_url, traces_url
from .event_pages import EVENT_BYTES_PER_SPAN
from .ids import SpanIds
from .mapping import MappingOptions, RunSpans, resource, scope
from .sender import BATCH, MAX_REQUEST_BYTES, ExportReport, Sender
from .transport import MAX_WAIT

ROOT_CACHE = 4096
"""Runs whose tree's root an export keeps at hand."""

FINISHED = frozenset(RunStatus(status) for status in FINISHED_STATUSES)
"""The statuses a run ends in (`FINISHED_STATUSES`, the one list retention reads too)."""

UNFINISHED = tuple(s.value for s in RunStatus if s not in FINISHED)
"""The statuses of a run that is not finished yet, as the store writes them."""


def finished(run: SpanRun) -> bool:
    """Whether `run` has ended (completed or failed), so its spans are final."""
    return RunStatus.from_str(run.status) in FINISHED


def since_stamp(value: str) -> str:
    """A `--since` time (`2026-08-01`, `2026-08-01T14:00:00Z`, `2026-08-01 14:00`; UTC when no
    offset is given; `harness_store.stamps`) as upstream writes its stamps."""
    return Stamp.parse(value, "--since").text


def _version() -> str:
    try:
        return metadata.version("harness_store")
    except metadata.PackageNotFoundError:
        return "0"


class Exporter:
    """One export's state: the id scheme, the span builder, the sender, and a small cache of
    which tree each run belongs to."""

    def __init__(
        self,
        store: Store,
        *,
        endpoint: str,
        headers: Mapping[str, str] | None,
        include_content: bool,
        prices: PriceTable | None,
        identity: str | None,
        project: str,
        timeout: float,
        batch: int = BATCH,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        max_wait: float = MAX_WAIT,
    ) -> None:
        self.store = store
        self.reads = TraceExport(store)
        url = traces_url(endpoint)
        self.report = ExportReport(shown_url(url))
        ident = identity or ""
        self.sender = Sender(
            url, headers or {}, timeout, self.report, batch, max_request_bytes, max_wait
        )
        event_bytes = min(EVENT_BYTES_PER_SPAN, self.sender.max_request_bytes // 2)
        self.builder = RunSpans(
            SpanIds(ident), resource(ident, project), scope(_version()),
            MappingOptions(include_content=include_content, prices=prices, event_bytes=event_bytes),
        )  # fmt: skip
        self.roots: OrderedDict[int, SpanRun] = OrderedDict()

    def _remember(self, run_id: int, root: SpanRun) -> SpanRun:
        self.roots[run_id] = root
        self.roots.move_to_end(run_id)
        while len(self.roots) > ROOT_CACHE:
            self.roots.popitem(last=False)
        return root

    def root_of(self, run: SpanRun) -> SpanRun:
        """The root run of `run`'s tree (cached for the most recent runs and their roots)."""
        if run.parent_run_id is None:
            return self._remember(run.id, run)
        root = self.roots.get(run.parent_run_id)
        if root is None:
            root_id = self.store.run_root(run.id)
            root = self.roots.get(root_id) or self.reads.run(root_id) or run
        return self._remember(run.id, root)

    def send_run(self, run: SpanRun) -> None:
        """Build and send one run's spans."""
        reads = self.reads
        root = self.root_of(run)
        rows = RunRows(
            run=run,
            root_run_id=root.id,
            steps=reads.steps(run.id),
            provider_calls=[],  # read a page at a time as the steps go, below
            tool_attempts=reads.tool_attempts(run.id),
            server_tool_calls=reads.server_tool_calls(run.id),
            mcp_events=reads.mcp_events(run.id),
            event_rows=reads.event_rows(run.id),
        )

        def calls(after: int, limit: int) -> list[SpanProviderCall]:
            return reads.provider_calls(run.id, after=after, limit=limit)

        for span in self.builder.spans(rows, root, calls):
            kind = (span.attributes or {}).get("gen_ai.operation.name")
            if kind == "chat":
                self.report.chat_spans += 1
            elif kind == "execute_tool":
                self.report.tool_spans += 1
            self.sender.add(span)
        self.report.runs += 1

    def send_runs(
        self, runs: Iterator[SpanRun], *, finished_only: bool = False,
        stop: threading.Event | None = None,
    ) -> None:  # fmt: skip
        """Send each run (with `finished_only`, each finished one; the others are listed in the
        report's `running`), until `stop` is set: then after the run in flight."""
        for run in runs:
            if stop is not None and stop.is_set():
                break
            if finished_only and not finished(run):
                self.report.running.append(run.id)
            else:
                self.send_run(run)
        self.sender.flush()

    def close(self) -> None:
        self.sender.close()


def trees_under(reads: TraceExport, store: Store, run_ids: Sequence[int]) -> set[int]:
    """Every run of the trees under `run_ids` (each run and its descendants), as `--run`
    selects them; `RunNotFoundError` for an id that names no run."""
    wanted: set[int] = set()
    for run_id in run_ids:
        if reads.run(run_id) is None:
            raise RunNotFoundError(f"no run with id {run_id} in the store")
        wanted.update(store.tree_run_ids(run_id))
    return wanted


def walk_runs(
    store: Store, *, since: str | None, run_ids: Sequence[int] | None, until: int | None = None
) -> Iterator[SpanRun]:
    """The runs to export, a page at a time: all (or those started or finished since
    `since`), or the trees under `run_ids`; with `until`, only runs whose id is not above it."""
    reads = TraceExport(store)
    if run_ids is not None:
        wanted = trees_under(reads, store, run_ids)
        ordered = sorted(r for r in wanted if until is None or r <= until)
        for i in range(0, len(ordered), RUN_PAGE):
            yield from reads.runs(run_ids=ordered[i : i + RUN_PAGE], since=since)
        return
    after = 0
    while True:
        page = reads.runs(after=after, since=since)
        for run in page:
            if until is not None and run.id > until:
                return
            yield run
        if len(page) < RUN_PAGE:
            return
        after = page[-1].id


def running_runs(store: Store, until: int, within: set[int] | None = None) -> Iterator[int]:
    """The ids of the runs not finished (running or paused), none above `until` (with
    `within`, only those among it: the trees `--run` selects), newest first within each
    status."""
    listings = Listings(store)
    for status in UNFINISHED:
        before = until + 1
        while True:
            page = listings.run_page(status=status, before=before)
            found = (listing.run_id for listing in page)
            yield from (found if within is None else (r for r in found if r in within))
            if len(page) < RUN_PAGE:
                break
            before = page[-1].run_id


def export(
    store: Store,
    *,
    endpoint: str,
    runs: Sequence[int] | None = None,
    since: str | None = None,
    headers: Mapping[str, str] | None = None,
    include_content: bool = False,
    prices: PriceTable | None = None,
    identity: str | None = None,
    project: str = "io-harness",
    timeout: float = 10.0,
    finished_only: bool = False,
    stop: threading.Event | None = None,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    max_wait: float = MAX_WAIT,
) -> ExportReport:
    """Send the store's runs (or the trees under `runs`; only those started or finished at or
    after the stamp `since`) as OTLP/HTTP protobuf spans to `endpoint` (a receiver's base URL,
    e.g. `http://127.0.0.1:6006`, or its full `/v1/traces` URL). One trace per tree of runs;
    the same rows always give the same ids. Raises `ExportError` when the receiver cannot be
    reached or refuses a batch (spans of earlier batches were delivered); never writes.
    `finished_only` leaves out runs not finished, running or paused (listed in the report's
    `running`): a receiver that keeps the first copy of a span id (Phoenix) would keep their
    unfinished state, so `follow` ships them once they finish. Once `stop` is set, the
    export ends after the run in flight: the report says what was sent. No request carries
    more than `BATCH` spans or `max_request_bytes` bytes (one span larger than that alone):
    a long run's trace goes out over several requests, with the same ids. `timeout` bounds
    each request; a batch the receiver pushes back (429, 502, 503, 504) is sent again after
    the pause its `Retry-After` asks for, or a growing one, for up to `max_wait` seconds."""
    stamp = since_stamp(since) if since is not None else None
    exporter = Exporter(
        store, endpoint=endpoint, headers=headers, include_content=include_content,
        prices=prices, identity=identity, project=project, timeout=timeout,
        max_request_bytes=max_request_bytes, max_wait=max_wait,
    )  # fmt: skip
    try:
        until = (store.last_run() or 0) if finished_only else None
        exporter.send_runs(
            walk_runs(store, since=stamp, run_ids=runs, until=until),
            finished_only=finished_only, stop=stop,
        )  # fmt: skip
        if until is not None:
            # a run started before `since` that is not finished is shipped once it finishes
            # (then finished since); with `runs`, only one of their trees
            exporter.report.last_run_id = until
            known = set(exporter.report.running)
            within = None if runs is None else trees_under(exporter.reads, store, runs)
            exporter.report.running.extend(
                r for r in running_runs(store, until, within) if r not in known
            )
        return exporter.report
    finally:
        exporter.close()
