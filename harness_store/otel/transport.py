"""Posting encoded batches of spans to an OTLP/HTTP receiver, each within a wall-clock limit,
and saying what became of each: only a 2xx answer counts as delivered.

The limit is a deadline per batch, retries included: a watchdog closes the connection when it
passes, so a receiver that answers a byte at a time cannot hold the export past it. What is
known when a batch fails is kept (`Failure`): whether the receiver was reached, whether the
whole batch was sent before it stopped answering (then it may have landed), or what it answered.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers that say "try again": retried with a growing pause while the deadline allows."""

FIRST_PAUSE = 0.5

STALE = "stale"
"""The detail of a failure on a kept connection the receiver had closed: retried at once."""


@dataclass(frozen=True)
class Failure:
    """How a batch failed: `stage` is `connect` (never reached), `send` (reached; the batch was
    cut off while it was being sent), `answer` (the whole batch was sent, no answer came in
    time: it may have landed) or `status` (the receiver answered `status`, not 2xx)."""

    stage: str
    detail: str
    status: int | None = None
    reason: str = ""
    location: str | None = None
    timed_out: bool = False

    @property
    def may_have_landed(self) -> bool:
        return self.stage in ("send", "answer")


class BatchFailed(Exception):
    """A batch was not delivered; `failure` says how."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.detail)
        self.failure = failure


class Watchdog:
    """Shuts a socket down when the deadline passes, so a read blocked on it returns."""

    def __init__(self, sock: socket.socket | None, seconds: float) -> None:
        self.fired = False
        self.sock = sock
        self.timer = threading.Timer(min(max(seconds, 0.0), threading.TIMEOUT_MAX), self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        self.fired = True
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self.timer.cancel()


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy the environment names for this scheme and host (`http_proxy`, `https_proxy`,
    `no_proxy`), or None."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return proxy


class Transport:
    """One receiver's connection: posts a batch's bytes with the given headers, reusing the
    connection while the receiver keeps it open."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        if timeout <= 0:
            raise ValueError("the timeout must be above 0 seconds")
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/x-protobuf", **headers}
        if parts.username or parts.password:
            pair = f"{parts.username or ''}:{parts.password or ''}".encode()
            self.headers.setdefault("Authorization", "Basic " + base64.b64encode(pair).decode())
        self.proxy = _proxy_for(parts.scheme, self.host)
        self.path_prefix = ""
        """The scheme and host the path is written after, through an http:// proxy."""
        self.connection: http.client.HTTPConnection | None = None

    def _connect(self, seconds: float) -> http.client.HTTPConnection:
        if self.connection is not None:
            return self.connection
        target_host, target_port = self.host, self.port
        proxy_headers: dict[str, str] = {}
        if self.proxy:
            p = urlsplit(self.proxy if "://" in self.proxy else "http://" + self.proxy)
            target_host, target_port = p.hostname or "", p.port or 80
            if p.username:
                pair = f"{p.username}:{p.password or ''}".encode()
                proxy_headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair).decode()
        connection: http.client.HTTPConnection
        if self.https:
            connection = http.client.HTTPSConnection(
                target_host, target_port, timeout=seconds, context=ssl.create_default_context()
            )
            if self.proxy:
                connection.set_tunnel(self.host, self.port, headers=proxy_headers)
        else:
            connection = http.client.HTTPConnection(target_host, target_port, timeout=seconds)
            if self.proxy:
                self.path_prefix = f"http://{self.host}:{self.port}"
                self.headers.update(proxy_headers, Host=f"{self.host}:{self.port}")
        connection.connect()
        self.connection = connection
        return connection

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def post(self, body: bytes) -> None:
        """Send one batch; return once the receiver answered 2xx, else raise `BatchFailed`.
        Answers that ask to try again (429, 502, 503, 504) are retried while the deadline
        allows, and a kept connection the receiver had closed at once; nothing else is."""
        deadline = time.monotonic() + self.timeout
        pause = FIRST_PAUSE
        while True:
            try:
                self._post_once(body, deadline)
                return
            except BatchFailed as failed:
                f = failed.failure
                if f.detail == STALE:
                    continue  # at once, on a new connection
                retry = f.stage == "status" and f.status in RETRY_STATUSES
                if not retry or time.monotonic() + pause >= deadline:
                    raise
            time.sleep(pause)
            pause *= 2

    def _post_once(self, body: bytes, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        reused = self.connection is not None
        try:
            connection = self._connect(remaining)
        except TimeoutError:
            self.close()
            raise BatchFailed(Failure("connect", "timed out", timed_out=True)) from None
        except OSError as exc:
            self.close()
            raise BatchFailed(Failure("connect", type(exc).__name__)) from None
        watchdog = Watchdog(connection.sock, deadline - time.monotonic())
        sent = False
        try:
            path = self.path_prefix + self.path
            connection.request("POST", path, body=body, headers=self.headers)
            sent = True
            response = connection.getresponse()
            status, reason = response.status, response.reason
            location = response.getheader("Location")
            try:
                response.read()
            except (OSError, http.client.HTTPException):
                self.close()  # the answer's status is what counts; its body was cut off
            if response.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if watchdog.fired or isinstance(exc, TimeoutError):
                stage = "answer" if sent else "send"
                raise BatchFailed(Failure(stage, "timed out", timed_out=True)) from None
            if reused and isinstance(exc, (ConnectionError, http.client.RemoteDisconnected)):
                # The receiver had closed the kept connection: as if it was never reached.
                raise BatchFailed(Failure("connect", STALE)) from None
            stage = "answer" if sent else "send"
            raise BatchFailed(Failure(stage, type(exc).__name__)) from None
        finally:
            watchdog.cancel()
        if not 200 <= status < 300:
            raise BatchFailed(
                Failure("status", f"HTTP {status}", status=status, reason=reason, location=location)
            )
