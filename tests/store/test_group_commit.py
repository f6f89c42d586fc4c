"""Group commit: threads of one process writing through one SQLite Store at once share one
transaction and one COMMIT, each caller in its own savepoint. Each call stays atomic and
isolated, a failing call fails alone, each thread's writes land in its order, and a process
killed mid-group leaves every caller's work whole or absent."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.processes import Worker

from harness_store import StepRecord, Store
from harness_store.errors import RunNotFoundError

THREADS = 8
CALLS = 60


def step(n: int) -> StepRecord:
    return StepRecord(n, "act", "ok", "p" * 100, "{}", 1)


def traced(store: Store) -> list[str]:
    """Every statement the Store's held connection runs from now on (SQLite's trace hook)."""
    seen: list[str] = []
    store._raw.set_trace_callback(seen.append)
    return seen


def together(work: list[Callable[[], None]]) -> list[BaseException | None]:
    """Run each function in its own thread, released at once; the error each raised."""
    barrier = threading.Barrier(len(work))
    outcome: list[BaseException | None] = [None] * len(work)

    def run(k: int) -> None:
        barrier.wait()
        try:
            work[k]()
        except BaseException as exc:
            outcome[k] = exc

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return outcome


def until(condition: Callable[[], object], what: str) -> None:
    """Poll `condition` until it holds, failing at a deadline well past any load."""
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.005)


def one_group(store: Store, work: list[Callable[[], None]]) -> list[BaseException | None]:
    """Run each function in its own thread, all of them committed by one group, by
    construction rather than by timing: another thread holds a `transaction()` block while
    the first call takes the lead (it waits for the connection) and the others queue behind
    it; once every one waits, the block ends and the leader takes them all into its
    transaction before its COMMIT. The error each raised."""
    group = store._connector._group  # type: ignore[attr-defined]
    in_block, release = threading.Event(), threading.Event()

    def block() -> None:
        with store.transaction():
            in_block.set()
            release.wait(120)

    outcome: list[BaseException | None] = [None] * len(work)

    def run(k: int) -> None:
        try:
            work[k]()
        except BaseException as exc:
            outcome[k] = exc

    holder = threading.Thread(target=block)
    holder.start()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(work))]
    try:
        assert in_block.wait(120)
        threads[0].start()
        until(lambda: group._leading, "a leader")
        for thread in threads[1:]:
            thread.start()
        until(lambda: len(group._pending) == len(work) - 1, "every caller queued")
    finally:
        release.set()
        holder.join(120)
    for thread in threads:
        thread.join(120)
    return outcome


def test_concurrent_checkpoints_keep_each_threads_order(tmp_path: Path) -> None:
    """Threads checkpointing at once, grouped however the scheduler lets them (a group made
    for certain: `test_callers_queued_behind_a_leader_share_its_commit`)."""
    with Store.open(tmp_path / "runs.sqlite3") as store:
        runs = [store.start_run(f"agent {k}", "out.txt") for k in range(THREADS)]

        def writer(run: int) -> Callable[[], None]:
            def write() -> None:
                for n in range(1, CALLS + 1):
                    store.checkpoint_step(run, step(n))

            return write

        assert together([writer(run) for run in runs]) == [None] * THREADS
        for run in runs:
            assert [s.step for s in store.steps(run)] == list(range(1, CALLS + 1))
            assert [e.step for e in store.checkpoint_events(run)] == list(range(1, CALLS + 1))
    conn = sqlite3.connect(tmp_path / "runs.sqlite3")
    try:
        # each thread's steps were inserted in its call order (ids follow the calls)
        for run in runs:
            ids = [
                r[0]
                for r in conn.execute("SELECT step FROM steps WHERE run_id = ? ORDER BY id", (run,))
            ]
            assert ids == list(range(1, CALLS + 1))
    finally:
        conn.close()


def test_callers_queued_behind_a_leader_share_its_commit(tmp_path: Path) -> None:
    """The callers that queue while a leader waits are run in its transaction, in one
    savepoint, and committed by its one COMMIT (`one_group` makes the group; free-running
    threads share commits only as the scheduler happens to let them)."""
    with Store.open(tmp_path / "runs.sqlite3") as store:
        runs = [store.start_run(f"agent {k}", "out.txt") for k in range(THREADS)]
        seen = traced(store)
        work = [lambda run=run: store.checkpoint_step(run, step(1)) for run in runs]
        assert one_group(store, work) == [None] * THREADS
        store._raw.set_trace_callback(None)
        # the block's own COMMIT, then the group's one
        assert [s for s in seen if s == "COMMIT"] == ["COMMIT", "COMMIT"], seen
        assert "SAVEPOINT hs_batch" in seen and not any(s.startswith("ROLLBACK") for s in seen)
        for run in runs:
            assert [s.step for s in store.steps(run)] == [1]


def test_a_failing_call_in_a_group_fails_alone(tmp_path: Path) -> None:
    """Threads checkpointing a run that does not exist get `RunNotFoundError` on every call,
    with nothing of theirs written; the threads grouped with them commit everything."""
    with Store.open(tmp_path / "runs.sqlite3") as store:
        runs = [store.start_run(f"agent {k}", "out.txt") for k in range(THREADS - 2)]
        missing = [10_001, 10_002]
        seen = traced(store)
        refused = [0, 0]

        def good(run: int) -> Callable[[], None]:
            def write() -> None:
                for n in range(1, CALLS + 1):
                    if n % 2:
                        store.checkpoint_step(run, step(n))
                    else:
                        store.checkpoint_steps(run, [step(n)])

            return write

        def bad(k: int) -> Callable[[], None]:
            def write() -> None:
                for n in range(1, CALLS + 1):
                    with pytest.raises(RunNotFoundError):
                        if n % 2:
                            store.checkpoint_step(missing[k], step(n))
                        else:
                            store.checkpoint_steps(missing[k], [step(n), step(n + 1)])
                    refused[k] += 1

            return write

        outcome = together([good(run) for run in runs] + [bad(0), bad(1)])
        assert outcome == [None] * THREADS
        assert refused == [CALLS, CALLS]
        for run in runs:
            assert [s.step for s in store.steps(run)] == list(range(1, CALLS + 1))
            assert [e.step for e in store.checkpoint_events(run)] == list(range(1, CALLS + 1))

        # and in a group made for certain (`one_group`): the leader and a failing call first,
        # good calls on either side of the other failing one
        del seen[:]
        grouped = [runs[0], missing[0], runs[1], missing[1], runs[2]]
        last = CALLS + 1
        work = [lambda run=run: store.checkpoint_steps(run, [step(last)]) for run in grouped]
        outcome = one_group(store, work)
        store._raw.set_trace_callback(None)
        assert [type(e) for e in outcome] == [
            type(None), RunNotFoundError, type(None), RunNotFoundError, type(None)
        ]  # fmt: skip
        assert "ROLLBACK TO hs_batch" in seen, "the failing calls were not in the group"
        assert [s for s in seen if s == "COMMIT"] == ["COMMIT", "COMMIT"]  # the block's, one
        for run in runs[:3]:
            assert [s.step for s in store.steps(run)][-1] == last
        for run in missing:
            assert store.steps(run) == [] and store.checkpoint_events(run) == []


def test_readers_never_see_half_a_call_of_a_group(tmp_path: Path) -> None:
    """Isolation: while threads commit batches of three steps in groups, a reader on its own
    connection only ever sees whole batches (a multiple of three steps, each with its event)."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        runs = [store.start_run(f"agent {k}", "out.txt") for k in range(4)]
        stop = threading.Event()
        torn: list[tuple[int, int, int]] = []

        def read() -> None:
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                while not stop.is_set():
                    conn.execute("BEGIN")
                    for run in runs:
                        steps = conn.execute(
                            "SELECT count(*) FROM steps WHERE run_id = ?", (run,)
                        ).fetchone()[0]
                        events = conn.execute(
                            "SELECT count(*) FROM checkpoint_events WHERE run_id = ?", (run,)
                        ).fetchone()[0]
                        if steps % 3 or steps != events:
                            torn.append((run, steps, events))
                    conn.execute("COMMIT")
            finally:
                conn.close()

        def writer(run: int) -> Callable[[], None]:
            def write() -> None:
                for n in range(0, 3 * 40, 3):
                    store.checkpoint_steps(run, [step(n + 1), step(n + 2), step(n + 3)])

            return write

        reader = threading.Thread(target=read)
        reader.start()
        try:
            assert together([writer(run) for run in runs]) == [None] * 4
        finally:
            stop.set()
            reader.join(30)
        assert torn == []
        for run in runs:
            assert [s.step for s in store.steps(run)] == list(range(1, 121))


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.3, 0.7, 1.3])
def test_a_process_killed_mid_group_leaves_each_call_whole_or_absent(
    tmp_path: Path, delay: float
) -> None:
    """SIGKILL while eight threads commit in groups (a checkpoint, then a batch of three, in
    turn): afterwards every run holds a gap-free prefix of its steps, each step with its
    event, and a batch is never cut (so the count is ≡ 0 or 1 mod 4)."""
    path = tmp_path / "runs.sqlite3"
    Store.open(path).close()
    worker = Worker.script("group_writer.py", path, THREADS)
    try:
        runs = [int(x) for x in worker.wait_line("runs ").split()[1:]]
        worker.wait_line("writing")
        time.sleep(delay)
    finally:
        worker.kill()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        for run in runs:
            assert whole_calls(conn, run) >= 4, "every thread had committed a call before the kill"
    finally:
        conn.close()


def whole_calls(conn: sqlite3.Connection, run: int) -> int:
    """How many steps a run holds, checked to be whole calls: a gap-free prefix of its steps,
    each with its event, never a batch of three cut (the count is ≡ 0 or 1 mod 4)."""
    steps = [
        r[0] for r in conn.execute("SELECT step FROM steps WHERE run_id = ? ORDER BY id", (run,))
    ]
    events = [
        r[0]
        for r in conn.execute(
            "SELECT step FROM checkpoint_events WHERE run_id = ? ORDER BY id", (run,)
        )
    ]
    assert steps == list(range(1, len(steps) + 1)), run
    assert events == steps, run
    assert len(steps) % 4 in (0, 1), f"run {run}: a batch of three was cut ({len(steps)})"
    return len(steps)


@pytest.mark.slow
@pytest.mark.parametrize(("group", "row"), [(3, 1), (25, 3), (60, 6), (5, 0), (40, 0)])
def test_a_process_killed_inside_a_group_keeps_every_returned_call_and_no_part_of_one(
    tmp_path: Path, group: int, row: int
) -> None:
    """The writer process SIGKILLs itself from inside a group's transaction (SQLite's trace
    hook, at the `row`-th row statement after the `group`-th batch savepoint: two callers or
    more in one transaction, some of their statements run, the COMMIT not yet; `row` 0: as
    that group's COMMIT starts, every statement run). Afterwards
    every call that had returned is there (a call returns only once durable) and every call is
    whole or absent: the half-run group left nothing."""
    path = tmp_path / "runs.sqlite3"
    Store.open(path).close()
    worker = Worker.script("group_writer.py", path, THREADS, group, row)
    try:
        runs = [int(x) for x in worker.wait_line("runs ").split()[1:]]
        worker.wait_line("dying", timeout=120)
        rc = worker.finish(timeout=60)
    finally:
        worker.kill()
    assert rc == -signal.SIGKILL, worker.stderr
    returned = {run: 0 for run in runs}
    for line in worker.lines:
        if line.startswith("done "):
            run, last = map(int, line.split()[1:])
            returned[run] = max(returned[run], last)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        for run in runs:
            assert whole_calls(conn, run) >= returned[run], f"run {run} lost a returned call"
        assert any(returned.values())
    finally:
        conn.close()


def test_a_waiting_caller_interrupted_by_a_signal_withdraws_and_leaves_no_one_hanging(
    tmp_path: Path,
) -> None:
    """The main thread waits behind another thread's group (which waits on a `transaction()`
    block of a third); a signal's exception interrupts it: its call is withdrawn (nothing of it
    written, the exception raised as itself), and the others still commit."""
    with Store.open(tmp_path / "runs.sqlite3") as store:
        run = store.start_run("g", "out.txt")
        in_block, release = threading.Event(), threading.Event()

        def block() -> None:
            with store.transaction():
                store.checkpoint_step(run, step(1))
                in_block.set()
                release.wait(30)

        errors: list[BaseException] = []

        def lead() -> None:
            try:
                store.checkpoint_step(run, step(2))  # leads a group, waits for the block
            except BaseException as exc:
                errors.append(exc)

        holder = threading.Thread(target=block)
        holder.start()
        assert in_block.wait(30)
        leader = threading.Thread(target=lead)
        leader.start()
        until(lambda: store._connector._group._leading, "a leader")  # type: ignore[attr-defined]

        def alarm(*_: object) -> None:
            raise TimeoutError("alarm")

        previous = signal.signal(signal.SIGALRM, alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(TimeoutError, match="alarm"):
                store.checkpoint_step(run, step(3))  # a follower of the waiting leader
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            release.set()
        holder.join(30)
        leader.join(30)
        assert not leader.is_alive() and errors == []
        assert [s.step for s in store.steps(run)] == [1, 2]
        later = threading.Thread(target=store.checkpoint_step, args=(run, step(4)), daemon=True)
        later.start()
        later.join(30)
        assert not later.is_alive(), "a later call was left waiting for a leader"
        assert [s.step for s in store.steps(run)] == [1, 2, 4]
