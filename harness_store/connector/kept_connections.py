"""Driver connections a Store keeps checked out for its hot paths (PostgreSQL).

Borrowing a pooled connection per checkpoint costs a pre-ping (a round trip) plus the pool's
checkout and reset: about half the time of the statement itself. A Store instead keeps a small
set of connections in autocommit, each with its cursor, and hands one to each call (threads
take whichever is idle; at most `cap` exist, so many threads never exhaust the pool). When all
are busy, waiting threads are served in the order they came: a connection given back is handed
to the longest waiter, so a thread calling in a loop cannot take its own back ahead of them.
Before a connection is reused, the backend checks it (see `Backend.connection_alive`: locally,
and with a round trip only after it sat idle, or after its last call failed); a dead one is
dropped and a fresh one taken. A connection that failed mid-call is never reused.

An `AsyncStore` on PostgreSQL keeps a set too (`on_loop=True`): its calls all run on the event
loop's thread, each in a greenlet, so a kept connection there is psycopg's `AsyncConnection`
(the asyncio pool's driver connection), driven through `Awaited`: each statement is awaited
from the call's greenlet, with no SQLAlchemy adapter between, by the same connector code as a
sync Store's. Connections are taken and given back with no lock wait — when all `cap` are in
use, `take` returns None and the call borrows from the asyncio pool instead of blocking the
loop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.util import await_only


class Held:
    """One kept connection: the pool's proxy (to invalidate it), the driver connection, a
    cursor on it."""

    __slots__ = ("cursor", "driver", "proxied", "used")

    def __init__(self, proxied: Any, on_loop: bool = False) -> None:
        self.proxied = proxied
        self.driver: Any = proxied.driver_connection
        """The driver's own connection (on the loop psycopg's `AsyncConnection`): statements
        run on it, and its state (closed, idle, its socket) is read here."""
        if on_loop:
            await_only(self.driver.set_autocommit(True))
            self.cursor: Any = Awaited(self.driver.cursor())
        else:
            self.driver.autocommit = True
            self.cursor = self.driver.cursor()
        self.used = time.monotonic()
        """When it was last given back."""

    def transaction(self) -> AbstractContextManager[Any]:
        """One transaction around several statements on this autocommit connection."""
        if isinstance(self.cursor, Awaited):
            return _statement_transaction(self.cursor)
        return self.driver.transaction()  # type: ignore[no-any-return]


@contextmanager
def _statement_transaction(cursor: Awaited) -> Iterator[None]:
    cursor.execute("BEGIN")
    try:
        yield
    except BaseException:
        cursor.execute("ROLLBACK")
        raise
    cursor.execute("COMMIT")


class Awaited:
    """A cursor of an asyncio driver (psycopg's `AsyncCursor`) used as a sync one from inside
    a call's greenlet: each method awaits the driver's coroutine there (`await_only`: one
    switch to the event loop and back), with no adapter between; `execute` returns the
    cursor, so `execute(...).fetchall()` chains as on a sync driver's."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: Any, params: Any = None) -> Awaited:
        await_only(self._cursor.execute(sql, params))
        return self

    def executemany(self, sql: Any, params: Any) -> Awaited:
        await_only(self._cursor.executemany(sql, params))
        return self

    def fetchall(self) -> list[Any]:
        return await_only(self._cursor.fetchall())

    def fetchmany(self, size: int) -> list[Any]:
        return await_only(self._cursor.fetchmany(size))

    def close(self) -> None:
        await_only(self._cursor.close())


class _Waiter:
    """A thread waiting for a kept connection: what it is handed (a connection, or None for
    a free place to open one in), and its own condition on the set's lock."""

    __slots__ = ("handed", "ready")

    def __init__(self, lock: threading.Lock) -> None:
        self.handed: Held | object | None = _WAITING
        self.ready = threading.Condition(lock)


_WAITING = object()
"""What a waiter holds until it is handed something."""


class HeldConnections:
    """A small LIFO set of kept driver connections, handed to waiting threads in the order
    they came (see the module)."""

    def __init__(
        self,
        engine: Engine,
        alive: Callable[[Any, float], bool],
        cap: int,
        *,
        on_loop: bool = False,
        ping: Callable[[Any], object] | None = None,
        ping_after: float = 0.0,
    ) -> None:
        self._engine = engine
        self._alive = alive
        self._cap = cap
        self._on_loop = on_loop
        self._ping = ping
        """On the loop, how an idle connection is pinged (through the adapter, awaiting in
        the call's greenlet); `alive` is then asked only what needs no round trip."""
        self._ping_after = ping_after
        self._idle: list[Held] = []
        self._count = 0
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()
        """Threads waiting for a connection, the longest first. A connection given back (or
        the place of one dropped) goes to the first of them, never to the idle list, so a
        thread that just gave one back cannot take it again ahead of them."""
        self._closed = False

    def take(self) -> Held | None:
        """An idle live connection, a new one while fewer than `cap` exist, else the next one
        given back once the threads that waited longer were served (on the loop: else None,
        and the call borrows instead)."""
        while True:
            with self._lock:
                if self._idle:
                    held: Held | None = self._idle.pop()
                elif self._count < self._cap:
                    self._count += 1
                    held = None
                elif self._on_loop:
                    return None
                else:
                    held = self._wait()
            if held is None:
                return self._new()
            try:
                usable = self._usable(held)
            except BaseException:  # a call cancelled in the ping: the connection is unknown
                self._drop(held)
                raise
            if usable:
                return held
            self._drop(held)

    def _wait(self) -> Held | None:
        """Wait (holding the lock) in line for what a thread hands over: a connection, or
        None for a place to open one in. Interrupted, the place in line is given up and
        anything already handed over passes on."""
        waiter = _Waiter(self._lock)
        self._waiters.append(waiter)
        try:
            while waiter.handed is _WAITING:
                waiter.ready.wait()
        except BaseException:
            if waiter.handed is _WAITING:
                self._waiters.remove(waiter)
            else:
                self._pass_on(waiter.handed)  # type: ignore[arg-type]
            raise
        return waiter.handed  # type: ignore[return-value]

    def _pass_on(self, held: Held | None) -> None:
        """(Holding the lock.) A connection, or the place of one dropped (None), to the
        longest waiter; with none waiting, to the idle list (or the count)."""
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.handed = held
            waiter.ready.notify()
        elif held is not None:
            self._idle.append(held)
        else:
            self._count -= 1

    def _new(self) -> Held:
        """A fresh kept connection from the pool; one whose setup did not finish (a call
        cancelled in it, on the loop) is closed, never left to the garbage collector."""
        proxied = None
        try:
            proxied = self._engine.raw_connection()
            return Held(proxied, self._on_loop)
        except BaseException:
            try:
                if proxied is not None:
                    proxied.invalidate()
            finally:
                self._forget()
            raise

    def _usable(self, held: Held) -> bool:
        idle = time.monotonic() - held.used
        if self._ping is None:
            return self._alive(held.driver, idle)
        if not self._alive(held.driver, 0.0):
            return False
        if idle > self._ping_after:
            try:
                self._ping(held.proxied.dbapi_connection)
            except Exception:
                return False
        return True

    def give(self, held: Held, reusable: bool, *, failed: bool = False) -> None:
        """Take a connection back after a call; one left in an unknown state is dropped. One
        whose call failed (but that is idle again) is checked with a round trip before its
        next use, as one idle for long is."""
        if reusable and not self._closed:
            held.used = float("-inf") if failed else time.monotonic()
            with self._lock:
                self._pass_on(held)
            return
        self._drop(held)

    def _drop(self, held: Held) -> None:
        try:
            held.proxied.invalidate()  # closed, never back in the pool
        finally:
            self._forget()

    def _forget(self) -> None:
        with self._lock:
            self._pass_on(None)

    def close(self) -> None:
        """Close the idle connections; those in use are closed when given back."""
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for held in idle:
            self._drop(held)

    def inherited(self) -> list[Any]:
        """After `fork()`: the parent's connections, to be kept referenced and never closed."""
        idle, self._idle = self._idle, []
        return [held.proxied for held in idle]
