"""Group commit's hand-over, side by side in one run: the leader's ways of waking its followers.

`python -m bench.handover [--threads 8] [--sync normal] [--rounds 7] [--seconds 0.5] [--one-cpu]`

Threads checkpoint their own runs through one Store for a short block, variant after variant
in interleaved rounds (the order rotates):
- raw: `sqlite3` per-call commits, each thread its own connection;
- in turn: the same raw commits, each call waiting for the one before it (`group.InTurn`);
- previous: the hand-over as it was written when this benchmark was (kept below): each
  follower waits on a lock of its own, which the leader releases one after the other;
- current: the package's `GroupCommit` as it is now;
- broadcast: the followers queued in one interval share one pipe, woken by one write;
- notify_all: the followers wait on one `threading.Condition` over the gate, woken by one
  `notify_all` once the leader has marked its batch done.
Prints per variant the median rate, its median ratio to raw per round, the process's context
switches per call, and each variant's median ratio to the previous code per round; first, the
round trip of two threads waking each other through locks (what a hand-over costs here).
`--one-cpu` runs every thread on one CPU (the benchmark's own affinity), where waking a thread
costs less than waking it on another CPU.
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_store.connector.group import Call, Work
from harness_store.errors import StoreError

from .common import Config, checkpoint_ops, step_record
from .group import drive, in_turn
from .stores import SQLITE, copy_store, head_template, raw_checkpoint_op, raw_connect


class PreviousGroupCommit:
    """The hand-over as it was: each follower waits on a lock of its own, which the leader
    releases one after the other."""

    def __init__(self, commit: Callable[[list[Call], Callable[[], list[Call]]], None]) -> None:
        self._commit = commit
        self._gate = threading.Lock()
        self._leading = False
        self._pending: list[Any] = []

    def submit(self, work: Work, many: bool) -> None:
        me: Any = Call(work, many)
        me.wake = None
        with self._gate:
            if self._leading:
                me.wake = threading.Lock()
                me.wake.acquire()
                self._pending.append(me)
            else:
                self._leading = True
        if me.wake is None:
            batch = [me]
        else:
            me.wake.acquire()
            if me.batch is None:
                if me.error is not None:
                    raise me.error
                return
            batch = me.batch
        try:
            self._commit(batch, self._late)
        except BaseException:
            for call in batch:
                if call.error is None:
                    call.error = StoreError("not committed: the committing thread was interrupted")
            raise
        finally:
            self._hand_over(batch, me)
        if me.error is not None:
            raise me.error

    def _late(self) -> list[Call]:
        if not self._pending:
            return []
        with self._gate:
            late, self._pending = self._pending, []
        return late

    def _hand_over(self, batch: list[Any], me: Any) -> None:
        with self._gate:
            pending = self._pending
            if pending:
                self._pending = []
                pending[0].batch = pending
            else:
                self._leading = False
        if pending:
            pending[0].wake.release()
        for call in batch:
            if call is not me:
                call.wake.release()


class Signal:
    """One pipe that wakes every follower waiting on it with one write (a broadcast)."""

    __slots__ = ("r", "w")

    def __init__(self) -> None:
        self.r, self.w = os.pipe()

    def __del__(self) -> None:
        os.close(self.r)
        os.close(self.w)


class BroadcastCall(Call):
    __slots__ = ("done", "signal")


class BroadcastGroupCommit(PreviousGroupCommit):
    """Experiment: the followers queued in one interval share one pipe; the leader wakes them
    all with one write (the next leader still gets its own lock)."""

    def __init__(self, commit: Callable[[list[Call], Callable[[], list[Call]]], None]) -> None:
        super().__init__(commit)
        self._signal: Signal | None = None

    def submit(self, work: Work, many: bool) -> None:
        me: Any = BroadcastCall(work, many)
        me.wake = None
        me.done = False
        with self._gate:
            if self._leading:
                me.wake = threading.Lock()
                me.wake.acquire()
                if self._signal is None:
                    self._signal = Signal()
                me.signal = self._signal
                me.done = False
                self._pending.append(me)
            else:
                self._leading = True
        if me.wake is None:
            batch = [me]
        else:
            while not me.done and me.batch is None:
                select.select([me.signal.r], [], [])
            if me.batch is None:
                if me.error is not None:
                    raise me.error
                return
            batch = me.batch
        try:
            self._commit(batch, self._late)
        except BaseException:
            for call in batch:
                if call.error is None:
                    call.error = StoreError("not committed: the committing thread was interrupted")
            raise
        finally:
            self._hand_over(batch, me)
        if me.error is not None:
            raise me.error

    def _late(self) -> list[Call]:
        if not self._pending:
            return []
        with self._gate:
            late, self._pending = self._pending, []
            self._signal = None
        return late

    def _hand_over(self, batch: list[Any], me: Any) -> None:
        with self._gate:
            pending = self._pending
            if pending:
                self._pending = []
                self._signal = None
                pending[0].batch = pending
            else:
                self._leading = False
            signals = {id(c.signal): c.signal for c in batch if c is not me}
            for call in batch:
                call.done = True
        for signal in signals.values():
            os.write(signal.w, b"x")
        if pending:
            os.write(pending[0].signal.w, b"x")


class ConditionGroupCommit(PreviousGroupCommit):
    """Experiment: followers wait on one `threading.Condition` over the gate; the leader marks
    its batch done and wakes everyone with one `notify_all`."""

    def __init__(self, commit: Callable[[list[Call], Callable[[], list[Call]]], None]) -> None:
        super().__init__(commit)
        self._changed = threading.Condition(self._gate)

    def submit(self, work: Work, many: bool) -> None:
        me: Any = BroadcastCall(work, many)
        me.done = False
        with self._gate:
            if self._leading:
                self._pending.append(me)
                while not me.done and me.batch is None:
                    self._changed.wait()
                if me.batch is None:
                    if me.error is not None:
                        raise me.error
                    return
                batch = me.batch
            else:
                self._leading = True
                batch = [me]
        try:
            self._commit(batch, self._late)
        except BaseException:
            for call in batch:
                if call.error is None:
                    call.error = StoreError("not committed: the committing thread was interrupted")
            raise
        finally:
            with self._gate:
                for call in batch:
                    call.done = True
                pending = self._pending
                if pending:
                    self._pending = []
                    pending[0].batch = pending
                else:
                    self._leading = False
                self._changed.notify_all()
        if me.error is not None:
            raise me.error


def switches() -> int:
    """Context switches of this process so far (its threads' voluntary and involuntary)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_nvcsw + used.ru_nivcsw


def round_trip(times: int = 20_000) -> float:
    """Seconds for one thread to wake another through a lock and be woken back."""
    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()

    def other() -> None:
        for _ in range(times):
            ping.acquire()
            pong.release()

    thread = threading.Thread(target=other)
    thread.start()
    began = time.perf_counter()
    for _ in range(times):
        ping.release()
        pong.acquire()
    took = time.perf_counter() - began
    thread.join()
    return took / times


def main() -> None:
    from harness_store import Store

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--sync", default="normal")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--one-cpu", action="store_true", help="run every thread on one CPU")
    args = parser.parse_args()
    if args.one_cpu:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # inherited by the threads
    trip = round_trip()
    with tempfile.TemporaryDirectory() as scratch:
        cfg = Config(quick=True, cache=Path(scratch), work=Path(scratch))
        template = head_template(cfg)
        paths = {
            k: copy_store(template, Path(scratch) / f"{k}.sqlite3")
            for k in ("r", "t", "p", "c", "b", "n")
        }
        previous = Store.open(paths["p"], synchronous=args.sync)
        current = Store.open(paths["c"], synchronous=args.sync)
        setup = Store.open(paths["r"], synchronous=args.sync)
        turn_setup = Store.open(paths["t"], synchronous=args.sync)
        broadcast = Store.open(paths["b"], synchronous=args.sync)
        bconn = broadcast._connector
        bconn._group = BroadcastGroupCommit(bconn._commit_calls)  # type: ignore[attr-defined]
        notify = Store.open(paths["n"], synchronous=args.sync)
        nconn = notify._connector
        nconn._group = ConditionGroupCommit(nconn._commit_calls)  # type: ignore[attr-defined]
        conn = previous._connector
        conn._group = PreviousGroupCommit(conn._commit_calls)  # type: ignore[attr-defined]
        variants: dict[str, list[Callable[[int], None]]] = {}
        conns = []
        for name, on, path in (("raw", setup, paths["r"]), ("in turn", turn_setup, paths["t"])):
            ops = []
            for k in range(args.threads):
                run = on.start_run(f"agent {k}", "f")
                c = raw_connect(path, args.sync, like=setup)
                conns.append(c)
                ops.append(raw_checkpoint_op(SQLITE, c, run, lambda n: step_record(n + 1)))
            variants[name] = in_turn(ops) if name == "in turn" else ops
        for name, store in (
            ("previous", previous),
            ("current", current),
            ("broadcast", broadcast),
            ("notify_all", notify),
        ):
            runs = [store.start_run(f"agent {k}", "f") for k in range(args.threads)]
            variants[name] = checkpoint_ops(store, runs, lambda n: step_record(n + 1))
        rates: dict[str, list[float]] = {name: [] for name in variants}
        per_call: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        drive(variants["raw"], 0.2)  # warm-up
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                before = switches()
                rate, latencies = drive(variants[name], args.seconds)
                rates[name].append(rate)
                per_call[name].append((switches() - before) / max(1, sum(map(len, latencies))))
        for c in conns:
            c.close()
        for store in (previous, current, setup, turn_setup, broadcast, notify):
            store.close()
    cpus = len(os.sched_getaffinity(0))
    print(
        f"threads {args.threads}, synchronous {args.sync}, {args.rounds} rounds x "
        f"{args.seconds:g} s, load {os.getloadavg()[0]:.1f}, {cpus} of {os.cpu_count()} CPUs; "
        f"a thread hand-off round trip {trip * 1e6:.1f} us"
    )
    for name in names:
        med = statistics.median(rates[name])
        line = (
            f"{name:10} {med:9.0f} calls/s  {statistics.median(per_call[name]):5.2f} switches/call"
        )
        if name != "raw":
            ratios = [s / r for s, r in zip(rates[name], rates["raw"], strict=True)]
            line += (
                f"  vs raw: median {statistics.median(ratios):.2f}x "
                f"(range {min(ratios):.2f}-{max(ratios):.2f})"
            )
        print(line)
    for name in names[3:]:
        ratios = [c / p for c, p in zip(rates[name], rates["previous"], strict=True)]
        print(
            f"{name} / previous: median {statistics.median(ratios):.2f}x "
            f"(range {min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
