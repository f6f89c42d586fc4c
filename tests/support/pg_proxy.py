"""A TCP forwarder between a client and a PostgreSQL server on 127.0.0.1 that reads the
client's protocol messages as they pass: it counts the statements sent (`Counting`), or cuts
the client off right after forwarding a COMMIT (`arm_commit_cut`), as a proxy or a network
that drops the client after the server received it would.

A URL through it (`url`) turns SSL and GSS encryption off, so the messages are readable. The
server's side of each connection stays open until `close`: nothing resets the server's socket
before it has read what was forwarded."""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from sqlalchemy.engine import make_url

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
"""The codes of the two requests a client may send before its startup message."""

STATEMENTS = (b"Q", b"E")
"""The messages that run a statement: a simple query, an extended-protocol Execute."""


class PgProxy:
    """The forwarder (see the module)."""

    def __init__(self, server_url: str) -> None:
        url = make_url(server_url)
        self.target = (url.host or "127.0.0.1", url.port or 5432)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.url = (
            url.set(host="127.0.0.1", port=self.port)
            .update_query_dict({"sslmode": "disable", "gssencmode": "disable"})
            .render_as_string(hide_password=False)
        )
        """`server_url`'s database, through the proxy."""
        self.cut = threading.Event()
        """Set once a client was cut off after its COMMIT."""
        self._armed = threading.Event()
        self._counting = threading.Event()
        self._sent: Counter[bytes] = Counter()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm_commit_cut(self, armed: bool = True) -> None:
        """Cut off the next client that sends COMMIT, right after forwarding it."""
        if armed:
            self._armed.set()
        else:
            self._armed.clear()

    @contextmanager
    def counting(self) -> Iterator[Counter[bytes]]:
        """The messages clients send during the body, by type byte (`STATEMENTS` run one)."""
        with self._lock:
            self._sent.clear()
        self._counting.set()
        try:
            yield self._sent
        finally:
            self._counting.clear()

    def statements(self, sent: Counter[bytes]) -> int:
        """How many statements the messages `sent` ran."""
        with self._lock:
            return sum(sent[kind] for kind in STATEMENTS)

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                with suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        """The server's bytes to the client; once the client is gone, read and dropped."""
        delivering = True
        while data := _recv(server):
            if delivering:
                try:
                    client.sendall(data)
                except OSError:
                    delivering = False

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        """The client's messages to the server, one whole message at a time."""
        pending, startup = b"", True
        while data := _recv(client):
            pending += data
            while True:
                if startup:  # untyped: its length, then a code
                    if len(pending) < 8 or len(pending) < int.from_bytes(pending[:4], "big"):
                        break
                    size = int.from_bytes(pending[:4], "big")
                    startup = int.from_bytes(pending[4:8], "big") in (SSL_REQUEST, GSSENC_REQUEST)
                else:  # a type byte, then the length of the rest
                    if len(pending) < 5 or len(pending) < 1 + int.from_bytes(pending[1:5], "big"):
                        break
                    size = 1 + int.from_bytes(pending[1:5], "big")
                message, pending = pending[:size], pending[size:]
                try:
                    server.sendall(message)
                except OSError:  # the server's side closed (the proxy is closing): done
                    return
                if self._counting.is_set() and not startup:
                    with self._lock:
                        self._sent[message[:1]] += 1
                if self._cuts_after(message):
                    client.shutdown(socket.SHUT_RDWR)
                    client.close()
                    return

    def _cuts_after(self, message: bytes) -> bool:
        if not self._armed.is_set() or self.cut.is_set():
            return False
        if message[:1] in (b"Q", b"P") and b"COMMIT" in message[5:].upper():
            self.cut.set()
            return True
        return False


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""
