"""Spans into requests a receiver takes: batches of at most `BATCH` spans and, encoded, at most
`max_request_bytes`, each posted by the transport, and what was delivered counted once in the
export's report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from ..errors import ExportError, InvalidValueError
from ..formats import is_int
from .endpoint import shown_url
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
