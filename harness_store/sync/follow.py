"""`follow(sources, dest)`: keep a central store a moment behind its sources, until stopped.

Each source has a thread of its own, which looks at the source's files (`watch.source_mark`)
every `interval` seconds, backing off to `max_interval` while nothing changes, and makes a pass
when they changed: the very pass `sync` makes of a source (`core.sync_source`), one snapshot
read and one central transaction. So a follower killed at any moment loses and doubles
nothing (the next pass sends what the killed one did not commit), a source restored from an
older backup is read again in full, and one that is replaced by another store gets an origin
of its own, exactly as with `sync`. A slow source holds up only its own thread; at most
`workers` passes run at once (one on a SQLite centre, which takes one writer at a time). Many
followers into one centre wait on nothing but each origin's own row: each pass is one
transaction, as long as its source's changes. A source's thread keeps no id map from pass to
pass: each pass reads from the centre the entries it needs. Two sources carrying one origin
mark are refused as `sync` refuses them, at the start (`DuplicateOriginError`) and, for a
source that comes to carry another's mark later, at its pass (refused until its file
changes).

What a host does to a source is waited out, said once: a source not there yet, deleted, or
refused (damaged, too old, of a newer io-harness, an unfinished transaction) is looked at
again when its file changes. Errors while a pass runs (a centre whose connections were
terminated or that restarted, a lock held too long) are retried with a backoff, up to
`RETRY_MAX` seconds apart; the centre is looked at again before the next pass. A centre that
refuses for a lasting reason — authentication, missing privileges or database, a schema newer
than this package's — ends `follow` with that error.

`follow` returns once `stop` is set (or on Ctrl-C), after one last pass of each source that
changed since its last (so what was committed before the stop is sent): each pass is let
finish for `STOP_GRACE` seconds after the stop, then rolled back at its next batch (its rows
are sent by the next start).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Literal

from sqlalchemy.engine import URL

from ..connector.translation import driver_message, is_disk_full, translated, typed_or_same
from ..dialects import backend_named
from ..engine import safe_url, where
from ..errors import (
    DuplicateOriginError,
    InvalidValueError,
    SchemaError,
    StoreAccessError,
    StoreError,
    StoreNotFoundError,
    UnansweredError,
)
from ..formats import is_int
from ..targets import Target
from .core import sync_source
from .destination import Destination
from .follow_report import FollowEvent, FollowNotice, FollowPass, FollowReport, NoticeKind, OnEvent
from .origin_state import BATCH, PAGE_CHECK_EVERY
from .sources import SOURCE_REFUSALS, Claim, close_all, open_or_none, peek_mark, refuse_shared_marks
from .watch import SourceMark, source_mark

INTERVAL = 0.05
"""Seconds between looks at a source that just changed."""
MAX_INTERVAL = 0.5
"""Seconds between looks at a source that has not changed for a while."""
RETRY_FIRST, RETRY_MAX = 0.5, 30.0
"""Seconds before a failed pass is made again, doubling up to the second figure."""
STOP_GRACE = 3.0
"""Seconds a pass in flight may go on after a stop before it is rolled back."""
REFUSAL_GRACE = 60.0
"""Seconds a centre that answers but refuses every connection is retried before `follow`
gives up (once connected before: a server restarting refuses for a while too)."""

Outcome = Literal["sent", "refused", "gone", "failed", "stopped"]


class _Stopped(Exception):
    """Raised at a batch boundary of a pass that went on too long after a stop."""


def follow(
    sources: Sequence[str | os.PathLike[str] | URL],
    dest: str | os.PathLike[str] | URL,
    *,
    stop: threading.Event | None = None,
    on_event: OnEvent | None = None,
    mark: bool = False,
    batch_size: int = BATCH,
    interval: float = INTERVAL,
    max_interval: float = MAX_INTERVAL,
    workers: int = 4,
) -> FollowReport:
    """Send each SQLite store of `sources` into the store at `dest` (PostgreSQL or SQLite)
    whenever it commits, until `stop` is set or Ctrl-C; see the module docstring.

    A source need not exist yet. `on_event` is called with every pass (`FollowPass`, also
    those that sent nothing) and notice (`FollowNotice`). Returns what was done; raises
    `SchemaError` when the centre is no store this package can write (e.g. a newer schema),
    `StoreAccessError` when it refuses the connection for good, and `InvalidValueError` for
    bad arguments (before anything runs)."""
    for name, value in (("batch_size", batch_size), ("workers", workers)):
        if not is_int(value) or value < 1:
            raise InvalidValueError(f"{name} must be a positive int, got {value!r}")
    if not 0 < interval <= max_interval:
        raise InvalidValueError(
            f"need 0 < interval <= max_interval, got {interval!r} and {max_interval!r}"
        )
    targets = _sources(sources)
    with Destination(dest) as destination:
        if backend_named(destination.url.get_backend_name()).one_connection:
            workers = 1
        follower = _Follower(
            destination,
            stop or threading.Event(),
            on_event,
            mark,
            batch_size,
            interval,
            max_interval,
        )
        return follower.run(targets, workers)


def _sources(sources: Sequence[str | os.PathLike[str] | URL]) -> list[Target]:
    """The sources parsed once, each a SQLite file path (which may not exist yet), each once."""
    found: dict[str, Target] = {}
    for source in sources:
        parsed = Target.parse(source, read_only=True)
        if parsed.path is None:
            raise InvalidValueError(
                f"sync follows SQLite store files; {parsed.where} is not one (a PostgreSQL "
                "store is already central)"
            )
        found.setdefault(str(parsed.path.resolve()), parsed)
    if not found:
        raise InvalidValueError("give at least one source to follow")
    return list(found.values())


class _Follower:
    def __init__(
        self,
        dest: Destination,
        stop: threading.Event,
        on_event: OnEvent | None,
        mark: bool,
        batch_size: int,
        interval: float,
        max_interval: float,
    ) -> None:
        self.dest = dest
        self.stop = stop
        self.on_event = on_event
        self.mark = mark
        self.batch_size = batch_size
        self.interval = interval
        self.max_interval = max_interval
        self.report = FollowReport(safe_url(dest.url))
        self.lock = threading.Lock()
        self.connected_once = False
        self.refused_since: float | None = None
        self.failure: BaseException | None = None
        self.stopped_at: float | None = None
        self.dirty: set[int] = set()
        self.marks: dict[int, str] = {}
        """The origin mark each source carried at its last pass (by position)."""
        self.started_at = time.time()
        """Wall clock: what was committed before is counted from here."""

    # --- the run -------------------------------------------------------------------------

    def run(self, targets: list[Target], workers: int) -> FollowReport:
        started = time.monotonic()
        self.slots = threading.BoundedSemaphore(workers)
        self.count = len(targets)
        self.targets = targets
        close_all(refuse_shared_marks(targets))  # as `sync` refuses them
        threads = [
            threading.Thread(
                target=self._watch, args=(at, target), name=f"hs-follow-{at}", daemon=True
            )
            for at, target in enumerate(targets)
        ]
        try:
            self._prepare_first()
            for thread in threads:
                thread.start()
            try:
                self.stop.wait()
            except KeyboardInterrupt:
                self.stop.set()
            self.stopped_at = time.monotonic()
            if self.failure is None:
                self._say("stopping", None, "stopping: finishing the passes in flight")
            for thread in threads:
                if thread.is_alive():
                    thread.join(STOP_GRACE + 10)
        finally:
            self.stop.set()
        self.report.seconds = time.monotonic() - started
        if self.failure is not None:
            raise self.failure
        return self.report

    def _prepare_first(self) -> None:
        """The centre made ready before any pass; a centre out of reach is waited for."""
        failures = 0
        while not self.stop.is_set():
            try:
                self._prepare()
                return
            except Exception as exc:
                lasting = self._lasting(exc)
                if lasting is not None:
                    raise lasting from None
                failures += 1
                self._say("retrying", None, f"the centre is out of reach ({_said(exc)}); waiting")
                self.stop.wait(_backoff(failures))

    def _prepare(self) -> None:
        self.dest.prepare()
        self.connected_once = True

    # --- one source ----------------------------------------------------------------------

    def _watch(self, at: int, source: Target) -> None:
        """One source's thread: what escapes it (an `on_event` that raised) ends `follow`
        with that error rather than leaving the source unwatched."""
        try:
            self._follow_one(at, source)
        except BaseException as exc:
            with self.lock:
                if self.failure is None:
                    self.failure = exc
            self.stop.set()

    def _follow_one(self, at: int, source: Target) -> None:
        assert source.path is not None  # `_sources` took file paths only
        claim: Claim = partial(self._claim, at)
        last: SourceMark | None = None
        checked: tuple[tuple[int, int], float] | None = None  # file identity, when checked
        seen = False
        said: str | None = None
        wait = self.interval
        failures = 0
        while not self.stop.is_set():
            now = source_mark(source.path)
            if now is None:
                kind: NoticeKind = "deleted" if seen else "waiting"
                text = "deleted; waiting for it to come back" if seen else "not there yet; waiting"
                said = self._say_once(said, kind, source.where, text)
                wait = min(wait * 2, self.max_interval)
                self.stop.wait(wait)
                continue
            seen = True
            if now == last and not self._take_dirty(at):
                wait = min(wait * 1.5, self.max_interval)
                self.stop.wait(wait)
                continue
            wait = self.interval
            check = (
                checked is None
                or checked[0] != now.identity
                or time.monotonic() - checked[1] > PAGE_CHECK_EVERY
            )
            outcome, text = self._pass(source, claim, now, check=check)
            if outcome == "sent":
                if check:
                    checked = (now.identity, time.monotonic())
                last = now
                if failures:
                    self._say("resumed", source.where, "the pass went through again")
                failures, said = 0, None
            elif outcome == "refused":
                last = now  # looked at again when its file changes
                said = self._say_once(said, "refused", source.where, text)
            elif outcome == "failed":
                failures += 1
                delay = _backoff(failures)
                said = self._say_once(
                    said, "retrying", source.where, f"{text}; retrying (every {delay:g} s)"
                )
                self.stop.wait(delay)
        if self.failure is None and failures == 0:  # what was committed before the stop goes
            now = source_mark(source.path)
            if now is not None and now != last:
                self._pass(source, claim, now, final=True)

    def _pass(
        self,
        source: Target,
        claim: Claim,
        before: SourceMark,
        *,
        final: bool = False,
        check: bool = True,
    ) -> tuple[Outcome, str]:
        """One pass over `source`, refused when `claim` refuses the mark it carries."""
        with self.slots:
            if self.stop.is_set() and not final:
                return "stopped", ""
            try:
                self._prepare()
            except Exception as exc:
                return self._failed(exc)
            try:
                done = sync_source(
                    source,
                    None,
                    self.dest.connector,
                    self.mark,
                    False,
                    self._on_rows,
                    self.batch_size,
                    check_pages=check,
                    claim=claim,
                )
            except _Stopped:
                return "stopped", ""
            except StoreNotFoundError:
                return "gone", ""
            except (*SOURCE_REFUSALS, DuplicateOriginError) as exc:
                return "refused", f"refused until it changes: {exc}"
            except Exception as exc:
                return self._failed(exc)
        self.refused_since = None
        committed = max(before.committed_ns / 1e9, self.started_at)
        delay = max(0.0, time.time() - committed)
        self._emit(
            FollowPass(
                source.where,
                done.origin,
                done.counts,
                done.seconds,
                delay,
                done.reread,
                done.warnings,
                tuple(q for q in done.quarantined if q.new),
                done.released,
            )
        )
        if done.uncovered:  # a deleted memory entry may uncover another origin's
            with self.lock:
                self.dirty.update(range(self.count))
        return "sent", ""

    def _claim(self, at: int, mark: str | None) -> None:
        """Refuse source `at` when it carries the origin mark another followed source
        carried at its last pass and still carries (a copy of it: their runs would overwrite
        each other centrally); else note that `at` carries `mark`."""
        with self.lock:
            if mark is None:
                self.marks.pop(at, None)
                return
            holders = [o for o, m in self.marks.items() if m == mark and o != at]
        for other in holders:
            if self._carries(other, mark):
                first, second = self.targets[other].where, self.targets[at].where
                raise DuplicateOriginError(
                    f"{first} and {second} carry the same origin mark {mark}: one is a copy of "
                    "the other, and their runs would overwrite each other centrally. "
                    f"{second} is not sent while {first} carries it; follow only one of them "
                    "(the store still in use)"
                )
        with self.lock:
            for other in holders:
                if self.marks.get(other) == mark:
                    del self.marks[other]  # no longer carries it
            self.marks[at] = mark

    def _carries(self, at: int, mark: str) -> bool:
        """Whether source `at` carries `mark` now (read from its file)."""
        try:
            store = open_or_none(self.targets[at])
        except Exception:
            return False
        if store is None:
            return False
        try:
            return peek_mark(store) == mark
        finally:
            store.close()

    def _on_rows(self, rows: int) -> None:
        stopped = self.stopped_at
        if stopped is not None and time.monotonic() - stopped > STOP_GRACE:
            raise _Stopped

    def _take_dirty(self, at: int) -> bool:
        with self.lock:
            if at in self.dirty:
                self.dirty.discard(at)
                return True
            return False

    # --- errors --------------------------------------------------------------------------

    def _failed(self, exc: Exception) -> tuple[Outcome, str]:
        """A failed pass: retried, or the end of `follow` when the centre refuses for good."""
        lasting = self._lasting(exc)
        if lasting is not None:
            with self.lock:
                if self.failure is None:
                    self.failure = lasting
            self.stop.set()
            return "stopped", ""
        self.dest.forget()  # the centre is looked at again before the next pass
        with self.lock:
            self.report.retries += 1
        if is_disk_full(exc):
            return "failed", (
                f"{where(self.dest.url)}: the disk is full; what the pass had committed is kept, "
                "the rest was rolled back, nothing half-written; free some space"
            )
        return "failed", _said(exc)

    def _lasting(self, exc: Exception) -> StoreError | None:
        """The error to end with when `exc` is a refusal no retry will change, else None: as
        the translation types it, a refusal of the centre's (`StoreAccessError`: a privilege
        the role lacks, a login or database refused) or a store it cannot write
        (`SchemaError`); or a connection the centre's server did not answer while it
        answers on its port (`UnansweredError`), at once before any pass connected, else
        after `REFUSAL_GRACE` seconds of them."""
        typed = typed_or_same(exc)
        if isinstance(typed, SchemaError | StoreAccessError):
            return typed
        if not isinstance(typed, UnansweredError) or not _reachable(self.dest.url):
            self.refused_since = None
            return None
        if not self.connected_once:
            return StoreAccessError(f"the centre refused the connection: {_said(exc)}")
        now = time.monotonic()
        if self.refused_since is None:
            self.refused_since = now
        if now - self.refused_since > REFUSAL_GRACE:
            return StoreAccessError(
                f"the centre refused every connection for {REFUSAL_GRACE:.0f} s: {_said(exc)}"
            )
        return None

    # --- saying --------------------------------------------------------------------------

    def _emit(self, event: FollowEvent) -> None:
        with self.lock:
            if isinstance(event, FollowPass):
                self.report.add(event)
            if self.on_event is not None:
                self.on_event(event)

    def _say(self, kind: NoticeKind, source: str | None, text: str) -> None:
        self._emit(FollowNotice(kind, source, text))

    def _say_once(self, said: str | None, kind: NoticeKind, source: str, text: str) -> str:
        """Say `text` unless it is what was said last about this source; what was said."""
        if text != said:
            self._say(kind, source, text)
        return text


def _backoff(failures: int) -> float:
    return float(min(RETRY_MAX, RETRY_FIRST * 2 ** min(failures - 1, 16)))


def _said(exc: BaseException) -> str:
    """An error as one line: the typed error its driver's code translates to, when there is
    one, else what the driver said."""
    typed = exc if isinstance(exc, StoreError) else translated(None, exc)
    text = str(typed) if typed is not None else driver_message(exc)
    first = next((line for line in text.splitlines() if line.strip()), text)
    return " ".join(first.split())


def _reachable(url: URL) -> bool:
    """Whether the centre's server accepts a TCP connection (or has its socket file): a
    failed connection to a server that answers is a refusal, not an outage."""
    if url.get_backend_name() != "postgresql":
        return False
    host = url.host or "localhost"
    if host.startswith("/"):
        return os.path.exists(os.path.join(host, f".s.PGSQL.{url.port or 5432}"))
    try:
        socket.create_connection((host, url.port or 5432), timeout=5).close()
    except OSError:
        return False
    return True
