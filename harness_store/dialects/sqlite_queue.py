"""The writers' queue of a SQLite store: a fair turn for every write harness_store makes to it
(the connector's, and so the Store's, sync's, copy's and the upgrade's) from any process on
the host, in front of `BEGIN IMMEDIATE` (see `SQLiteWriteQueue`), kept in a side file while
writers have the store open."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import struct
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..errors import StoreLockedError
from .sqlite_codes import SQLITE_BUSY, SQLITE_LOCKED, primary_code
from .write_queue import WriteQueue

QUEUE_SUFFIX = "-writers"
"""The side file whose `flock` orders harness_store's writers to one database file. It exists
only while a harness_store writer has the store open: the last one to close removes it."""

PRESENCE = (
    struct.Struct("hhqqi4x") if sys.platform == "linux" and hasattr(fcntl, "F_OFD_SETLK") else None
)
"""Linux `struct flock` for open-file-description locks on the queue file's byte 1, which
every writer holding the file open keeps shared, so a closing writer knows whether it is the
last (where these locks do not exist the queue file stays beside the store)."""


def presence_lock(fd: int, kind: int, *, wait: bool) -> bool:
    """Set this open file's presence lock (`fcntl.F_RDLCK`, `F_WRLCK` or `F_UNLCK`); False
    when another writer's lock is in the way (without `wait`)."""
    assert PRESENCE is not None
    command = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
    try:
        fcntl.fcntl(fd, command, PRESENCE.pack(kind, os.SEEK_SET, 1, 1, 0))
    except (BlockingIOError, PermissionError):
        return False
    return True


def same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open on `fd` (not removed or replaced)."""
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def open_queue_file(path: Path, store: Path) -> int:
    """Open (creating) the queue file with the store's mode and group, past the umask, and
    take its shared presence lock; a file a closing writer removed meanwhile is created anew."""
    try:
        info: os.stat_result | None = store.stat()
    except OSError:
        info = None
    mode = stat.S_IMODE(info.st_mode) & 0o666 if info is not None else 0o600
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        try:
            mine = os.fstat(fd)
            if mine.st_uid == os.geteuid():
                if stat.S_IMODE(mine.st_mode) != mode:
                    os.fchmod(fd, mode)
                if info is not None and mine.st_gid != info.st_gid:
                    with suppress(OSError):  # a group the user is not in
                        os.fchown(fd, -1, info.st_gid)
            if PRESENCE is None:
                return fd
            presence_lock(fd, fcntl.F_RDLCK, wait=True)
            if same_file(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # removed by the last writer while this one opened it: again


def close_queue_file(fd: int, path: Path) -> None:
    """Close the queue file, removing it when no other writer holds it open."""
    if PRESENCE is not None:
        last = presence_lock(fd, fcntl.F_WRLCK, wait=False)
        if not last:  # another closer may be on its way out too: step back, then try again
            presence_lock(fd, fcntl.F_UNLCK, wait=False)
            last = presence_lock(fd, fcntl.F_WRLCK, wait=False)
        if last and same_file(fd, path):
            with suppress(FileNotFoundError):
                os.unlink(path)
    os.close(fd)


def is_busy(exc: BaseException) -> bool:
    """Whether a driver error is SQLite's "another connection holds the lock" (BUSY, LOCKED)."""
    return primary_code(exc) in (SQLITE_BUSY, SQLITE_LOCKED)


def locked_error(timeout: float) -> StoreLockedError:
    """The error of a writer that waited its whole busy timeout in vain."""
    return StoreLockedError(
        f"the store stayed locked by other writers past the busy timeout ({timeout:g} s)"
    )


def wait_turn(fd: int, deadline: float, timeout: float) -> None:
    """Take the queue's `flock`, waiting until `deadline` (then `StoreLockedError`).

    Waiters retry every millisecond or two, so whoever is waiting when the holder commits has
    an even chance at the next turn — unlike the busy handler, whose sleeps grow to 100 ms and
    let one writer lose for the whole timeout.
    """
    pause = 0.0002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise locked_error(timeout) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.002)


def begin_immediate(cursor: Any, deadline: float, timeout: float) -> None:
    """`BEGIN IMMEDIATE` on a connection whose busy timeout is 0, retried every few hundred
    microseconds until `deadline` while another connection holds the write lock.

    SQLite's own busy handler sleeps 1, 2, 5, … up to 100 ms between tries: a writer that does
    not know the queue (io-harness, a plain `sqlite3` writer) and commits in a tight loop holds
    the lock nearly all the time, frees it for tens of microseconds between commits, and a
    writer probing every 100 ms can miss every gap for its whole timeout (seen under FULL, where
    each commit's fsync keeps the lock for milliseconds). Probing every ≤ 0.5 ms catches a gap
    within a few of the other writer's commits.
    """
    pause = 0.00005
    while True:
        try:
            cursor.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            if time.monotonic() >= deadline:
                raise locked_error(timeout) from exc
        time.sleep(pause)
        pause = min(pause * 2, 0.0005)


class SQLiteWriteQueue(WriteQueue):
    """A fair queue in front of `BEGIN IMMEDIATE` for every write harness_store makes on the host.

    SQLite's busy handler sleeps and retries, so under steady contention an unlucky writer can
    lose every race until its busy timeout ends. Here a writer first takes an exclusive `flock`
    on a side file (`<store>-writers`) and holds it only for its write transaction: waiting
    writers retry every millisecond or two and the next one starts soon after the last commits.
    The writer at the head of the queue then takes SQLite's lock by probing at short intervals
    (`begin_immediate`) rather than through the busy handler, so writers that do not know the
    queue (io-harness itself) cannot starve it either; they are still served by their own busy
    handler. A store whose directory cannot take the side file (read-only), or an in-memory
    one (`path` None), writes without a queue. One deadline, the busy timeout, bounds the wait
    in the queue and on the lock together.
    """

    def __init__(self, path: Path | None, timeout: float) -> None:
        self._timeout = timeout
        self._busy_ms = int(timeout * 1000)
        self._path: Path | None = None if path is None else Path(f"{path}{QUEUE_SUFFIX}")
        self._store = path
        self._fd: int | None = None
        self._holding = False
        self._nowait: Any = None
        """The driver connection whose busy timeout `begin` set to 0 (restored by `settle`)."""

    def _open(self) -> int | None:
        if self._fd is None and self._path is not None and self._store is not None:
            try:
                self._fd = open_queue_file(self._path, self._store)
            except OSError:
                self._path = None  # e.g. a read-only directory: no queue, the busy handler
        return self._fd

    @contextmanager
    def turn(self) -> Iterator[float | None]:
        fd = self._open()
        deadline = time.monotonic() + self._timeout
        if fd is None:
            yield deadline
            return
        wait_turn(fd, deadline, self._timeout)
        try:
            yield deadline
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def begin(self, cursor: Any) -> None:
        deadline = 0.0
        fd = self._fd if self._fd is not None else self._open()
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                deadline = time.monotonic() + self._timeout
                wait_turn(fd, deadline, self._timeout)
            self._holding = True
        try:
            connection = cursor.connection
            if self._nowait is not connection:
                cursor.execute("PRAGMA busy_timeout = 0")
                self._nowait = connection
            try:
                cursor.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                begin_immediate(cursor, deadline or time.monotonic() + self._timeout, self._timeout)
        except BaseException:
            self.end()
            raise

    def end(self) -> None:
        if self._holding:
            self._holding = False
            assert self._fd is not None
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def settle(self, connection: Any) -> None:
        if self._nowait is not None and self._nowait is connection:
            connection.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            self._nowait = None

    def forked(self) -> None:
        # flock belongs to the open file description, which the child shares with the parent:
        # the child opens its own (closing its copy never releases the parent's hold).
        self._holding = False
        self._nowait = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._holding = False
        self._nowait = None
        if self._fd is not None:
            fd, self._fd = self._fd, None
            assert self._path is not None
            close_queue_file(fd, self._path)
