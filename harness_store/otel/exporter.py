"""Sending a store's runs to an OTLP/HTTP receiver: the walk over the store (a page of runs at
a time, one run's rows at a time, so memory stays flat as the store grows), the batches handed
to the OpenTelemetry SDK's OTLP exporter, and the follow loop over the event stream.

An export only reads: the store is opened by the caller, and nothing is written to it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from urllib.parse import urljoin, urlsplit, urlunsplit

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from ..errors import ExportError, InvalidValueError, RunNotFoundError, StoreConnectionError
from ..formats import is_int
from ..records import PriceTable, RunStatus
from ..records.runs import FINISHED_STATUSES
from ..stamps import Stamp
from ..store import Store
from ..store.export_reads import RUN_PAGE, RunRows, SpanProviderCall, SpanRun
from .mapping import EVENT_BYTES_PER_SPAN, MappingOptions, RunSpans, SpanIds, resource, scope
from .transport import MAX_WAIT, BatchFailed, Failure, Transport

BATCH = 512
"""Spans sent per OTLP request at most."""

MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The largest request body sent by default: 4 MiB, which the OpenTelemetry Collector's OTLP/HTTP
receiver (20 MiB by default), Phoenix and MLflow (no limit of their own) take, and which is the
gRPC default message size a collector forwarding the spans meets next. A batch encoded larger
is split; a single span larger than it is sent alone."""

SMALLEST_REQUEST = 4096
"""The least `max_request_bytes` takes: below it, most spans would go out one per request."""

TRACES_PATH = "/v1/traces"

ROOT_CACHE = 4096
"""Runs whose tree's root an export keeps at hand."""

FINISHED = frozenset(RunStatus(status) for status in FINISHED_STATUSES)
"""The statuses a run ends in (`FINISHED_STATUSES`, the one list retention reads too)."""

UNFINISHED = tuple(s.value for s in RunStatus if s not in FINISHED)
"""The statuses of a run that is not finished yet, as the store writes them."""


def finished(run: SpanRun) -> bool:
    """Whether `run` has ended (completed or failed), so its spans are final."""
    return RunStatus.from_str(run.status) in FINISHED


@dataclass
class ExportReport:
    """What an export sent: runs and spans, by kind, and the last event cursor it read."""

    endpoint: str
    runs: int = 0
    spans: int = 0
    chat_spans: int = 0
    tool_spans: int = 0
    requests: int = 0
    last_run_id: int = 0
    """The highest run id the export (or follow) has taken into account: a follow from this
    report goes on after it."""
    running: list[int] = field(default_factory=list)
    """Runs left out because they were not finished, running or paused (`finished_only`)."""


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for `endpoint`: a base URL (`http://host:4318`) gets
    `/v1/traces`; a URL that already names a path is used as it is."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidValueError(f"{shown_url(endpoint)} is not an http:// or https:// URL")
    if parts.path in ("", "/"):
        parts = parts._replace(path=TRACES_PATH)
    return urlunsplit(parts)


def shown_url(url: str) -> str:
    """A URL as an error message shows it: without its user and password."""
    parts = urlsplit(url)
    if parts.hostname and (parts.username or parts.password):
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


def since_stamp(value: str) -> str:
    """A `--since` time (`2026-08-01`, `2026-08-01T14:00:00Z`, `2026-08-01 14:00`; UTC when no
    offset is given; `harness_store.stamps`) as upstream writes its stamps."""
    return Stamp.parse(value, "--since").text


def _version() -> str:
    try:
        return metadata.version("harness_store")
    except metadata.PackageNotFoundError:
        return "0"


def request_limit(max_request_bytes: int) -> int:
    """`max_request_bytes` checked: `InvalidValueError` for a size below `SMALLEST_REQUEST`."""
    if not is_int(max_request_bytes):
        raise InvalidValueError(f"a request size is a number of bytes, not {max_request_bytes!r}")
    if max_request_bytes < SMALLEST_REQUEST:
        raise InvalidValueError(
            f"a request size must be at least {SMALLEST_REQUEST:,} bytes, not {max_request_bytes:,}"
        )
    return max_request_bytes


class Sender:
    """Batches spans and posts each batch (OTLP protobuf), each request within the timeout (a
    wall-clock limit) and a batch the receiver pushes back sent again for up to `max_wait`
    seconds; a batch not answered 2xx raises `ExportError` saying what is known: unreachable,
    refused (the status), still pushed back, or reached but slow (and which spans may have
    landed). A batch is counted once, when it is taken. A batch holds at most `batch` spans
    and, encoded, at most `max_request_bytes` (a larger one is halved until it fits, or is one
    span)."""

    def __init__(
        self, url: str, headers: Mapping[str, str], timeout: float, report: ExportReport,
        batch: int = BATCH, max_request_bytes: int = MAX_REQUEST_BYTES,
        max_wait: float = MAX_WAIT,
    ) -> None:  # fmt: skip
        self.url = url
        self.timeout = timeout
        self.transport = Transport(url, dict(headers), timeout, max_wait)
        self.report = report
        self.batch = batch
        self.max_request_bytes = request_limit(max_request_bytes)
        self.pending: list[ReadableSpan] = []

    def add(self, span: ReadableSpan) -> None:
        self.pending.append(span)
        if len(self.pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        spans, self.pending = self.pending, []
        self._post(spans)

    def _post(self, spans: list[ReadableSpan]) -> None:
        body = encode_spans(spans).SerializePartialToString()
        if len(body) > self.max_request_bytes and len(spans) > 1:
            del body
            half = len(spans) // 2
            self._post(spans[:half])
            self._post(spans[half:])
            return
        try:
            self.transport.post(body)
        except BatchFailed as failed:
            raise ExportError(self.failure(failed.failure, len(spans))) from None
        self.report.requests += 1
        self.report.spans += len(spans)

    def failure(self, f: Failure, size: int) -> str:
        where = shown_url(self.url)
        r = self.report
        batches = "batch" if r.requests == 1 else "batches"
        before = (
            f"{r.spans:,} spans in {r.requests:,} earlier {batches} were delivered"
            if r.requests
            else "no earlier batch"
        )
        if f.stage == "status":
            what = f"HTTP {f.status} {f.reason}".rstrip()
            if f.waited is not None:
                batch = f"batch {r.requests + 1:,} (spans {r.spans + 1:,}-{r.spans + size:,})"
                return (
                    f"the OTLP receiver at {where} kept answering {what} (try again later) "
                    f"past the {f.waited:g} s the export waits for it: {batch} was not "
                    f"delivered; {before}"
                )
            if f.status is not None and 300 <= f.status < 400:
                to = f" to {shown_url(urljoin(self.url, f.location))}" if f.location else ""
                return (
                    f"the OTLP receiver at {where} answered {what}{to}: the spans were not "
                    f"delivered (give the URL it names as the endpoint); {before}"
                )
            return f"the OTLP receiver at {where} refused the spans: {what}; {before}"
        limit = f"{self.timeout:g} s"
        if f.stage == "connect":
            kind = f"no connection within {limit}" if f.timed_out else f.detail
            return f"cannot reach the OTLP receiver at {where} ({kind}); {before}"
        batch = f"batch {r.requests + 1:,} (spans {r.spans + 1:,}-{r.spans + size:,})"
        if f.stage == "answer" and f.timed_out:
            return (
                f"the OTLP receiver at {where} was reached but did not answer within {limit}: "
                f"{batch} was sent and may have landed; {before}"
            )
        if f.stage == "answer":
            return (
                f"the OTLP receiver at {where} was reached but dropped the connection "
                f"({f.detail}) before answering: {batch} was sent and may have landed; {before}"
            )
        cause = f"within {limit}" if f.timed_out else f"({f.detail})"
        return (
            f"the OTLP receiver at {where} was reached but did not take the whole of {batch} "
            f"{cause}: part of it may have landed; {before}"
        )

    def close(self) -> None:
        self.transport.close()


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
            root = self.roots.get(root_id) or self.store.span_run(root_id) or run
        return self._remember(run.id, root)

    def send_run(self, run: SpanRun) -> None:
        """Build and send one run's spans."""
        store = self.store
        root = self.root_of(run)
        rows = RunRows(
            run=run,
            root_run_id=root.id,
            steps=store.span_steps(run.id),
            provider_calls=[],  # read a page at a time as the steps go, below
            tool_attempts=store.span_tool_attempts(run.id),
            server_tool_calls=store.span_server_tool_calls(run.id),
            mcp_events=store.span_mcp_events(run.id),
            event_rows=store.span_event_rows(run.id),
        )

        def calls(after: int, limit: int) -> list[SpanProviderCall]:
            return store.span_provider_calls(run.id, after=after, limit=limit)

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


def walk_runs(
    store: Store, *, since: str | None, run_ids: Sequence[int] | None, until: int | None = None
) -> Iterator[SpanRun]:
    """The runs to export, a page at a time: all (or those started or finished since
    `since`), or the trees under `run_ids`; with `until`, only runs whose id is not above it."""
    if run_ids is not None:
        wanted: set[int] = set()
        for run_id in run_ids:
            if store.span_run(run_id) is None:
                raise RunNotFoundError(f"no run with id {run_id} in the store")
            wanted.update(store.tree_run_ids(run_id))
        ordered = sorted(r for r in wanted if until is None or r <= until)
        for i in range(0, len(ordered), RUN_PAGE):
            yield from store.span_runs(run_ids=ordered[i : i + RUN_PAGE], since=since)
        return
    after = 0
    while True:
        page = store.span_runs(after=after, since=since)
        for run in page:
            if until is not None and run.id > until:
                return
            yield run
        if len(page) < RUN_PAGE:
            return
        after = page[-1].id


def running_runs(store: Store, until: int) -> Iterator[int]:
    """The ids of the runs not finished (running or paused), none above `until`, newest first
    within each status."""
    for status in UNFINISHED:
        before = until + 1
        while True:
            page = store.run_page(status=status, before=before)
            yield from (listing.run_id for listing in page)
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
            exporter.report.last_run_id = until
            known = set(exporter.report.running)
            exporter.report.running.extend(r for r in running_runs(store, until) if r not in known)
        return exporter.report
    finally:
        exporter.close()


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
        self.store = exporter.store
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
        """`span_runs`, read once more on a new connection when the first read's connection
        is lost (a terminated session); lost again, the error ends the follow."""
        try:
            return self.store.span_runs(after=after, run_ids=run_ids)
        except StoreConnectionError:  # a read: safe to repeat
            return self.store.span_runs(after=after, run_ids=run_ids)


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
