"""Driver connections a Store keeps checked out for its hot paths (PostgreSQL).

Borrowing a pooled connection per checkpoint costs a pre-ping (a round trip) plus the pool's
checkout and reset: about half the time of the statement itself. A Store instead keeps a small
set of connections in autocommit, each with its cursor, and hands one to each call (threads
take whichever is idle; at most `cap` exist, so many threads never exhaust the pool). Before a
connection is reused, the backend checks it (see `Backend.connection_alive`: locally, and with
a round trip only after it sat idle); a dead one is dropped and a fresh one taken. A
connection that failed mid-call is never reused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine


class Held:
    """One kept connection: the pool's proxy (to invalidate it), the driver connection, a
    cursor on it."""

    __slots__ = ("cursor", "driver", "proxied", "used")

    def __init__(self, proxied: Any) -> None:
        self.proxied = proxied
        self.driver: Any = proxied.driver_connection
        self.driver.autocommit = True
        self.cursor: Any = self.driver.cursor()
        self.used = time.monotonic()
        """When it was last given back."""


class HeldConnections:
    """A small LIFO set of kept driver connections (see the module)."""

    def __init__(self, engine: Engine, alive: Callable[[Any, float], bool], cap: int) -> None:
        self._engine = engine
        self._alive = alive
        self._cap = cap
        self._idle: list[Held] = []
        self._count = 0
        self._ready = threading.Condition(threading.Lock())
        self._closed = False

    def take(self) -> Held:
        """An idle live connection, a new one while fewer than `cap` exist, else the next one
        another thread gives back."""
        while True:
            with self._ready:
                while not self._idle and self._count >= self._cap:
                    self._ready.wait()
                held = self._idle.pop() if self._idle else None
                if held is None:
                    self._count += 1
            if held is None:
                try:
                    return Held(self._engine.raw_connection())
                except BaseException:
                    self._forget()
                    raise
            if self._alive(held.driver, time.monotonic() - held.used):
                return held
            self._drop(held)

    def give(self, held: Held, reusable: bool) -> None:
        """Take a connection back after a call; one left in an unknown state is dropped."""
        if reusable and not self._closed:
            held.used = time.monotonic()
            with self._ready:
                self._idle.append(held)
                self._ready.notify()
            return
        self._drop(held)

    def _drop(self, held: Held) -> None:
        try:
            held.proxied.invalidate()  # closed, never back in the pool
        finally:
            self._forget()

    def _forget(self) -> None:
        with self._ready:
            self._count -= 1
            self._ready.notify()

    def close(self) -> None:
        """Close the idle connections; those in use are closed when given back."""
        self._closed = True
        with self._ready:
            idle, self._idle = self._idle, []
        for held in idle:
            self._drop(held)

    def inherited(self) -> list[Any]:
        """After `fork()`: the parent's connections, to be kept referenced and never closed."""
        idle, self._idle = self._idle, []
        return [held.proxied for held in idle]
