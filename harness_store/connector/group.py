"""Group commit: concurrent writers of one Store share one transaction and one commit.

When several threads write through one Store at once, the first becomes the leader: it opens
one write transaction, runs the waiting callers' statements back to back (in one savepoint;
should one fail, they are rerun each in a savepoint of its own, so that it fails alone),
takes in those who queued meanwhile, commits once (one fsync under FULL) and then wakes them
all, each with its own outcome. Callers that arrive while a leader is committing queue up;
when it is done, the first of them leads the next batch with everyone who arrived in the
meantime. A lone caller finds no leader and runs alone, without a savepoint, a thread or a
wait: the only cost is one uncontended lock and a look at the queue before its COMMIT.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import StoreError

Work = Sequence[tuple[Any, Any]]
"""A caller's statements: (pre-compiled statement, parameters) pairs, run in order."""


class Call:
    """One caller's write in a group: its statements, and what became of them."""

    __slots__ = ("batch", "error", "many", "wake", "work")

    def __init__(self, work: Work, many: bool) -> None:
        self.work = work
        self.many = many
        self.error: BaseException | None = None
        """Set by the leader when this call's work was not committed."""
        self.wake: threading.Lock | None = None
        """Held while the caller waits as a follower; the leader releases it to wake it."""
        self.batch: list[Call] | None = None
        """Set when this waiting caller is handed the lead: the batch it commits."""


class GroupCommit:
    """Leader/follower coordination of one Store's write transactions (see the module)."""

    def __init__(self, commit: Callable[[list[Call], Callable[[], list[Call]]], None]) -> None:
        self._commit = commit
        """Runs a batch in one transaction, setting each call's `error`; raises only for an
        interruption of the leader itself (after setting every other call's `error`). Its
        second argument takes the calls that queued meanwhile, to join them to the batch
        before the COMMIT (the batch list is extended with them)."""
        self._gate = threading.Lock()
        self._leading = False
        self._pending: list[Call] = []

    def submit(self, work: Work, many: bool) -> None:
        """Run `work` in a transaction, batched with whoever else is writing; return once it is
        committed, or raise its own error (a failing call fails alone)."""
        me = Call(work, many)
        with self._gate:
            if self._leading:
                me.wake = threading.Lock()
                me.wake.acquire()
                self._pending.append(me)
            else:
                self._leading = True
        interrupted: BaseException | None = None
        if me.wake is None:
            batch = [me]
        else:
            interrupted = self._wait(me)  # until the leader has committed us, or hands us the lead
            if me.batch is None:
                if interrupted is not None:
                    raise interrupted
                if me.error is not None:
                    raise me.error
                return
            batch = me.batch
        try:
            self._commit(batch, self._late)
        except BaseException:
            for call in batch:
                if call.error is None:  # interrupted before the batch could say
                    call.error = StoreError("not committed: the committing thread was interrupted")
            raise
        finally:
            self._hand_over(batch, me)
        if interrupted is not None:
            raise interrupted
        if me.error is not None:
            raise me.error

    def _wait(self, me: Call) -> BaseException | None:
        """Wait for the leader's word. An interruption (a signal's exception in the main
        thread) withdraws the call if no leader has taken it yet, and is raised; once taken,
        the call is seen through — its outcome awaited, or the lead it was handed taken, so
        that no waiter is left without a leader — and the interruption is returned, to be
        raised after."""
        assert me.wake is not None
        try:
            me.wake.acquire()
            return None
        except BaseException as exc:
            with self._gate:
                if me in self._pending:
                    self._pending.remove(me)
                    raise
            interrupted = exc
        while True:
            try:
                me.wake.acquire()
                return interrupted
            except BaseException:
                continue

    def _late(self) -> list[Call]:
        """The callers that queued while the batch ran: they join it and its COMMIT (they
        are woken with it)."""
        if not self._pending:  # a hint read without the lock: a caller it misses waits a batch
            return []
        with self._gate:
            late, self._pending = self._pending, []
        return late

    def _hand_over(self, batch: list[Call], me: Call) -> None:
        """Wake the batch's followers, and pass the lead to the first caller waiting, if any."""
        with self._gate:
            pending = self._pending
            if pending:
                self._pending = []
                pending[0].batch = pending
            else:
                self._leading = False
        if pending:  # the next leader first: its commit is on everyone's critical path
            assert pending[0].wake is not None
            pending[0].wake.release()
        for call in batch:
            if call is not me:
                assert call.wake is not None
                call.wake.release()
