"""A loopback OTLP/HTTP receiver of the tests' own, for what the real receivers cannot show:
it counts every span it is sent (Phoenix and MLflow keep one copy of a span id, so a span sent
twice looks sent once there), and it can answer in ways a real receiver sometimes does — a
redirect, or a reply trickled a byte at a time.

`Sink.start(behaviour)` serves on 127.0.0.1 from a thread; `behaviour` is `"ok"` (200 and
every span decoded and counted; with `slow_after`, the replies after that many requests
trickle), `"redirect-302"`, `"redirect-308"`, or `"trickle"` (reads
the request, counts its spans, then sends its reply one byte per `TRICKLE_PAUSE` seconds).

Any behaviour can push back first, as a receiver at capacity does: with `busy` set, requests
are answered `busy_status` (503 by default; with `Retry-After: retry_after` when that is set)
and their spans not counted, while `busy()` is true (see `busy_for`), and the time of every
request is kept in `attempts`, so a test sees the pauses the client took between them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

TRICKLE_PAUSE = 0.5

REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"


@dataclass
class Sink:
    """What the receiver was sent: each span id's count, and the spans' attributes by id."""

    server: ThreadingHTTPServer
    behaviour: str
    counts: Counter[bytes] = field(default_factory=Counter)
    spans: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    requests: int = 0
    arrivals: list[int] = field(default_factory=list)
    """Run ids in the order their `invoke_agent` spans arrived."""
    paths: list[str] = field(default_factory=list)
    """The request targets as sent (a request through a proxy names the whole URL)."""
    bodies: list[tuple[int, int]] = field(default_factory=list)
    """Each request's body size in bytes and its number of spans, in order."""
    slow_after: int | None = None
    """With `ok`: trickle the replies to requests after this many."""
    busy: Callable[[], bool] | None = None
    """While it returns true, requests are pushed back (`busy_status`), their spans not taken."""
    busy_status: int = 503
    retry_after: str | Callable[[], str] | None = None
    """The `Retry-After` value sent with a pushed-back request, if any; a function is asked at
    each answer (an HTTP date a few seconds after the answer, however late the client came)."""
    attempts: list[float] = field(default_factory=list)
    """The monotonic time each request arrived at, pushed back or not."""
    pushed_back: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    got_request: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @classmethod
    def start(cls, behaviour: str = "ok") -> Sink:
        sink: Sink

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                sink.paths.append(self.path)
                with sink.lock:
                    sink.attempts.append(time.monotonic())
                if sink.busy is not None and sink.busy():
                    with sink.lock:
                        sink.pushed_back += 1
                    self.send_response(sink.busy_status)
                    if sink.retry_after is not None:
                        value = sink.retry_after
                        self.send_header("Retry-After", value() if callable(value) else value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if sink.behaviour.startswith("redirect-"):
                    status = int(sink.behaviour.removeprefix("redirect-"))
                    self.send_response(status)
                    self.send_header("Location", "/elsewhere/v1/traces")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                sink.take(body)
                if sink.behaviour == "trickle" or (
                    sink.slow_after is not None and sink.requests > sink.slow_after
                ):
                    try:
                        for byte in REPLY:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(TRICKLE_PAUSE)
                    except OSError:
                        pass  # the client gave up: what a trickled reply is for
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        sink = cls(server, behaviour)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return sink

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            self.requests += 1
            spans = 0
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        spans += 1
                        self.counts[span.span_id] += 1
                        attributes = {a.key: _value(a.value) for a in span.attributes}
                        steps = [
                            _value(a.value)
                            for e in span.events
                            if e.name == "harness.step"
                            for a in e.attributes
                            if a.key == "harness.step"
                        ]
                        events = [
                            {a.key: _value(a.value) for a in e.attributes} for e in span.events
                        ]
                        self.spans[span.span_id] = {
                            "name": span.name, "trace_id": span.trace_id,
                            "parent": span.parent_span_id, "step_events": steps,
                            "events": events, **attributes,
                        }  # fmt: skip
                        if attributes.get("gen_ai.operation.name") == "invoke_agent":
                            self.arrivals.append(attributes["harness.run.id"])
            self.bodies.append((len(body), spans))
        self.got_request.set()

    def busy_for(self, seconds: float | None) -> None:
        """Push back every request from now on for `seconds` (None: for ever)."""
        until = None if seconds is None else time.monotonic() + seconds
        self.busy = lambda: until is None or time.monotonic() < until

    def pauses(self) -> list[float]:
        """The seconds between one request's arrival and the next's."""
        with self.lock:
            return [b - a for a, b in zip(self.attempts, self.attempts[1:], strict=False)]

    def total(self) -> int:
        with self.lock:
            return sum(self.counts.values())

    def run_ids(self) -> Counter[int]:
        """How many times each run's `invoke_agent` span arrived."""
        with self.lock:
            return Counter(
                {
                    s["harness.run.id"]: self.counts[span_id]
                    for span_id, s in self.spans.items()
                    if s.get("gen_ai.operation.name") == "invoke_agent"
                }
            )

    def wait_for(self, predicate: Any, timeout: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.2)
        return bool(predicate())

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)
