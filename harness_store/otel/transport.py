"""Posting encoded batches of spans to an OTLP/HTTP receiver and saying what became of each:
only a 2xx answer counts as delivered.

Two clocks bound a batch. The timeout bounds each request (connect, send, answer): a watchdog
closes the connection when it passes, so a receiver that answers a byte at a time cannot hold
the export past it. The wait bounds how long a batch is held back by a receiver that pushes
back (429, 502, 503, 504, as Phoenix does while its queue is full): it is sent again after the
pause `Retry-After` asks for, or a growing, jittered one, until it is taken or the next pause
would end past the wait. What is known when a batch fails is kept (`Failure`): whether the
receiver was reached, whether the whole batch was sent before it stopped answering (then it
may have landed), or what it answered.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.client
import random
import socket
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers that push back ("try again later", the OTLP specification's retryable statuses):
the batch is sent again after a pause, while the wait allows."""

FIRST_PAUSE = 0.5
"""The first pause after a push-back without `Retry-After`; each next one doubles, up to
`MAX_PAUSE`, and each is jittered down by up to half so that exporters do not come back at
once."""

MAX_PAUSE = 30.0

MAX_RETRY_AFTER = 120.0
"""The longest `Retry-After` honoured as it is: a receiver asking for more (an hour, a date
tomorrow) is tried again after this long."""

MAX_WAIT = 300.0
"""How long a batch may be held back by push-backs by default, from the first: time for a
receiver at capacity (Phoenix writes a few dozen spans a second on two CPUs) to make room."""

STALE = "stale"
"""The detail of a failure on a kept connection the receiver had closed: retried at once."""


@dataclass(frozen=True)
class Failure:
    """How a batch failed: `stage` is `connect` (never reached), `send` (reached; the batch was
    cut off while it was being sent), `answer` (the whole batch was sent, no answer came in
    time: it may have landed) or `status` (the receiver answered `status`, not 2xx; with
    `waited`, a push-back it kept answering for the whole wait)."""

    stage: str
    detail: str
    status: int | None = None
    reason: str = ""
    location: str | None = None
    timed_out: bool = False
    retry_after: float | None = None
    """With a push-back: the seconds its `Retry-After` asked for (`retry_after_seconds`)."""
    waited: float | None = None
    """Set when the receiver still pushed back at the end of the wait: the wait's seconds."""

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


def retry_after_seconds(value: str, now: float) -> float | None:
    """The pause a `Retry-After` header asks for, in seconds from `now` (a `time.time()`): a
    number of seconds, or an HTTP date (one past is 0); at most `MAX_RETRY_AFTER`. None when
    it is neither (then the pause is the client's own)."""
    text = value.strip()
    if text.isascii() and text.isdigit():
        seconds = float(text)
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # an HTTP date is in GMT
            when = when.replace(tzinfo=datetime.UTC)
        seconds = max(0.0, when.timestamp() - now)
    return min(seconds, MAX_RETRY_AFTER)


def backoff(tries: int) -> float:
    """The pause after the `tries`-th push-back (from 0) that named no `Retry-After`."""
    return min(MAX_PAUSE, FIRST_PAUSE * 2.0 ** min(tries, 32)) * random.uniform(0.5, 1.0)


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
    connection while the receiver keeps it open. `timeout` bounds each request, `max_wait`
    the pauses a batch is held back by push-backs."""

    def __init__(
        self, url: str, headers: dict[str, str], timeout: float, max_wait: float = MAX_WAIT
    ) -> None:
        if not timeout > 0:
            raise ValueError("the timeout must be above 0 seconds")
        if not max_wait >= 0:
            raise ValueError("the wait must be 0 seconds or more")
        self.max_wait = max_wait
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
        Each request has the timeout. A push-back (429, 502, 503, 504) is sent again, the same
        bytes, after the pause it asks for (`Retry-After`) or `backoff`'s, until the next
        pause would end more than `max_wait` after the first push-back (0: not sent again
        at all); a kept connection the receiver had closed is sent again at once; nothing
        else is."""
        first_push: float | None = None
        tries = 0
        while True:
            try:
                self._post_once(body, time.monotonic() + self.timeout)
                return
            except BatchFailed as failed:
                f = failed.failure
                if f.detail == STALE:
                    continue  # at once, on a new connection
                if f.stage != "status" or f.status not in RETRY_STATUSES:
                    raise
                now = time.monotonic()
                first_push = now if first_push is None else first_push
                pause = f.retry_after if f.retry_after is not None else backoff(tries)
                tries += 1
                if self.max_wait == 0 or now + pause - first_push > self.max_wait:
                    raise BatchFailed(replace(f, waited=self.max_wait)) from None
            time.sleep(pause)

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
            retry_after = response.getheader("Retry-After")
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
            asked = retry_after_seconds(retry_after, time.time()) if retry_after else None
            raise BatchFailed(
                Failure(
                    "status", f"HTTP {status}", status=status, reason=reason, location=location,
                    retry_after=asked,
                )
            )  # fmt: skip
