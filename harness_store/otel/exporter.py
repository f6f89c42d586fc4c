"""Sending a store's runs to an OTLP/HTTP receiver: the walk over the store (a page of runs at
a time, one run's rows at a time, so memory stays flat as the store grows), the batches handed
to the OpenTelemetry SDK's OTLP exporter, and the follow loop over the event stream.

An export only reads: the store is opened by the caller, and nothing is written to it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from ..errors import ExportError, InvalidValueError, RunNotFoundError
from ..records import PriceTable
from ..store import Store
from ..store.spans import RUN_PAGE, RunRows, SpanRun
from .mapping import MappingOptions, RunSpans, SpanIds, resource, scope

BATCH = 512
"""Spans sent per OTLP request."""

TRACES_PATH = "/v1/traces"

FOLLOW_PAGE = 500
"""Events read per poll when following."""


@dataclass
class ExportReport:
    """What an export sent: runs and spans, by kind, and the last event cursor it read."""

    endpoint: str
    runs: int = 0
    spans: int = 0
    chat_spans: int = 0
    tool_spans: int = 0
    requests: int = 0
    cursor: int = 0
    running: list[int] = field(default_factory=list)
    """Runs left out because they were still running (`finished_only`)."""


class WitnessSession(requests.Session):
    """A requests session that remembers how the last request ended, so a refused or failed
    export can say why (the SDK's exporter only answers success or failure)."""

    def __init__(self) -> None:
        super().__init__()
        self.last_status: int | None = None
        self.last_reason: str | None = None
        self.last_error: BaseException | None = None

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.last_status = self.last_reason = self.last_error = None
        try:
            response = super().request(method, url, *args, **kwargs)
        except requests.RequestException as exc:
            self.last_error = exc
            raise
        self.last_status, self.last_reason = response.status_code, response.reason
        return response


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
    offset is given) as the store writes its stamps, so the two compare as text."""
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidValueError(
            f"{value!r} is not a time (use 2026-08-01 or 2026-08-01T14:00:00Z)"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"


def _version() -> str:
    try:
        return metadata.version("harness_store")
    except metadata.PackageNotFoundError:
        return "0"


def store_identity(store: Store) -> str:
    """The store's identity when the caller gives none: a digest of its first run's id, start
    stamp and goal, which stay with the store when it is copied or moved (an empty store has
    none yet: `empty`)."""
    first = store.span_runs(limit=1)
    if not first:
        return "empty"
    run = first[0]
    anchor = f"{run.id}\x1f{run.started_at or ''}\x1f{run.goal}".encode()
    return "run-" + hashlib.blake2b(anchor, digest_size=8).hexdigest()


class Sender:
    """Batches spans and sends each batch with the SDK's OTLP/HTTP exporter; a batch the
    receiver refuses, or cannot be reached with, raises `ExportError` naming the URL."""

    def __init__(
        self, url: str, headers: Mapping[str, str], timeout: float, report: ExportReport,
        batch: int = BATCH,
    ) -> None:  # fmt: skip
        self.url = url
        self.session = WitnessSession()
        self.exporter = OTLPSpanExporter(
            endpoint=url, headers=dict(headers), timeout=timeout, session=self.session
        )
        self.report = report
        self.batch = batch
        self.pending: list[ReadableSpan] = []

    def add(self, span: ReadableSpan) -> None:
        self.pending.append(span)
        if len(self.pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        spans, self.pending = self.pending, []
        if self.exporter.export(spans) is not SpanExportResult.SUCCESS:
            raise ExportError(self.failure())
        self.report.requests += 1
        self.report.spans += len(spans)

    def failure(self) -> str:
        where = shown_url(self.url)
        s = self.session
        if s.last_status is not None:
            return (
                f"the OTLP receiver at {where} refused the spans: HTTP {s.last_status} "
                f"{s.last_reason or ''}".rstrip()
            )
        if s.last_error is not None:
            kind = type(s.last_error).__name__
            return f"cannot reach the OTLP receiver at {where} ({kind})"
        return f"the spans could not be sent to the OTLP receiver at {where}"

    def close(self) -> None:
        self.exporter.shutdown()  # type: ignore[no-untyped-call]


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
    ) -> None:
        self.store = store
        url = traces_url(endpoint)
        self.report = ExportReport(shown_url(url))
        ident = identity if identity is not None else store_identity(store)
        self.builder = RunSpans(
            SpanIds(ident), resource(ident, project), scope(_version()),
            MappingOptions(include_content=include_content, prices=prices),
        )  # fmt: skip
        self.sender = Sender(url, headers or {}, timeout, self.report, batch)
        self.roots: OrderedDict[int, int] = OrderedDict()

    def root_of(self, run: SpanRun) -> int:
        """The root of `run`'s tree (cached for the most recent runs' parents)."""
        if run.parent_run_id is None:
            return run.id
        root = self.roots.get(run.parent_run_id)
        if root is None:
            root = self.store.run_root(run.id)
        self.roots[run.id] = root
        self.roots.move_to_end(run.id)
        while len(self.roots) > 4096:
            self.roots.popitem(last=False)
        return root

    def send_run(self, run: SpanRun) -> None:
        """Build and send one run's spans."""
        store = self.store
        rows = RunRows(
            run=run,
            root_run_id=self.root_of(run),
            steps=store.span_steps(run.id),
            provider_calls=store.span_provider_calls(run.id),
            tool_attempts=store.span_tool_attempts(run.id),
            server_tool_calls=store.span_server_tool_calls(run.id),
            mcp_events=store.span_mcp_events(run.id),
            event_rows=store.span_event_rows(run.id),
        )
        for span in self.builder.spans(rows):
            kind = (span.attributes or {}).get("gen_ai.operation.name")
            if kind == "chat":
                self.report.chat_spans += 1
            elif kind == "execute_tool":
                self.report.tool_spans += 1
            self.sender.add(span)
        self.report.runs += 1

    def send_runs(self, runs: Iterator[SpanRun], *, finished_only: bool = False) -> None:
        for run in runs:
            if finished_only and run.status == "running":
                self.report.running.append(run.id)
            else:
                self.send_run(run)
        self.sender.flush()

    def close(self) -> None:
        self.sender.close()


def walk_runs(
    store: Store, *, since: str | None, run_ids: Sequence[int] | None
) -> Iterator[SpanRun]:
    """The runs to export, a page at a time: all (or those started or finished since
    `since`), or the trees under `run_ids`."""
    if run_ids is not None:
        wanted: set[int] = set()
        for run_id in run_ids:
            if store.span_run(run_id) is None:
                raise RunNotFoundError(f"no run with id {run_id} in the store")
            wanted.update(store.tree_run_ids(run_id))
        ordered = sorted(wanted)
        for i in range(0, len(ordered), RUN_PAGE):
            yield from store.span_runs(run_ids=ordered[i : i + RUN_PAGE], since=since)
        return
    after = 0
    while True:
        page = store.span_runs(after=after, since=since)
        yield from page
        if len(page) < RUN_PAGE:
            return
        after = page[-1].id


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
) -> ExportReport:
    """Send the store's runs (or the trees under `runs`; only those started or finished at or
    after the stamp `since`) as OTLP/HTTP protobuf spans to `endpoint` (a receiver's base URL,
    e.g. `http://127.0.0.1:6006`, or its full `/v1/traces` URL). One trace per tree of runs;
    the same rows always give the same ids. Raises `ExportError` when the receiver cannot be
    reached or refuses a batch (spans of earlier batches were delivered); never writes.
    `finished_only` leaves out runs still running (listed in the report's `running`): a
    receiver that keeps the first copy of a span id (Phoenix) would keep their unfinished
    state, so `follow` ships them once they finish."""
    stamp = since_stamp(since) if since is not None else None
    exporter = Exporter(
        store, endpoint=endpoint, headers=headers, include_content=include_content,
        prices=prices, identity=identity, project=project, timeout=timeout,
    )  # fmt: skip
    try:
        exporter.report.cursor = store.event_cursor()
        exporter.send_runs(walk_runs(store, since=stamp, run_ids=runs), finished_only=finished_only)
        return exporter.report
    finally:
        exporter.close()


def follow(
    store: Store,
    *,
    endpoint: str,
    cursor: int | None = None,
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
) -> ExportReport:
    """Ship runs as they finish: follow the store's event stream from `cursor` (None: from
    now) and send each run once its status leaves `running`, until `stop` is set; `running`
    names runs already known to be running (an export's `running`). Memory holds only the
    runs seen running and not yet finished. `on_send` is called after each run sent."""
    exporter = Exporter(
        store, endpoint=endpoint, headers=headers, include_content=include_content,
        prices=prices, identity=identity, project=project, timeout=timeout, batch=BATCH,
    )  # fmt: skip
    live: set[int] = set(running)
    position = store.event_cursor() if cursor is None else cursor
    stop = stop or threading.Event()
    try:
        while not stop.is_set():
            page = store.events_after(position, FOLLOW_PAGE)
            for _, event in page:
                live.add(event.run_id)
            if page:
                position = page[-1][0]
            exporter.report.cursor = position
            for run_id in sorted(live):
                run = store.span_run(run_id)
                if run is None or run.status != "running":
                    live.discard(run_id)
                if run is not None and run.status != "running":
                    exporter.send_runs(iter([run]))
                    if on_send is not None:
                        on_send(exporter.report)
            if len(page) < FOLLOW_PAGE:
                stop.wait(interval)
        return exporter.report
    finally:
        exporter.close()
