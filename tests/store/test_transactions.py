"""`Store.transaction()` on both backends: each Store call inside it is atomic on its own (a
savepoint), a caught failure of one call keeps the others, nested blocks are savepoints, and a
transaction that cannot commit raises. Foreign keys hold on both backends, as upstream's."""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support import upstream_sql as up
from support.policies import PERMISSIVE_POLICY
from support.upstream_sql import counts, raw

from harness_store import (
    AgentEvent,
    ContextEvent,
    McpEvent,
    Observation,
    ObsKind,
    PolicyEvent,
    StepRecord,
    Store,
)
from harness_store.errors import RunNotFoundError, StoreConnectionError


class Boom(Exception):
    """An error of the caller's own, raised inside a block."""


def step(n: int) -> StepRecord:
    return StepRecord.new(n, f"step {n}", "ok")


def test_a_caught_store_error_inside_a_transaction_keeps_the_other_writes(
    store_target: str,
) -> None:
    with Store.open(store_target) as store:
        with store.transaction():
            run = store.start_run("goal", "out.txt")
            with pytest.raises(RunNotFoundError):
                store.checkpoint_step(run + 1000, step(1))
            with pytest.raises(RunNotFoundError):
                store.record(run + 1000, step(1))
            with pytest.raises(RunNotFoundError):
                store.checkpoint_steps(run + 1000, [step(1), step(2)])
            store.checkpoint_step(run, step(1))
        assert store.runs() == [run]
        assert [s.step for s in store.steps(run)] == [1]
        assert [e.step for e in store.checkpoint_events(run)] == [1]


def test_a_nested_transaction_is_all_or_none_and_the_outer_goes_on(store_target: str) -> None:
    with Store.open(store_target) as store:
        with store.transaction():
            first = store.start_run("first", "out.txt")
            with pytest.raises(Boom), store.transaction():
                store.start_run("inner", "out.txt")
                store.checkpoint_step(first, step(1))
                raise Boom
            with store.transaction():
                kept = store.start_run("kept", "out.txt")
            store.checkpoint_step(first, step(2))
        assert sorted(store.runs()) == [first, kept]
        assert [s.step for s in store.steps(first)] == [2]


def test_an_error_of_the_callers_own_rolls_the_whole_transaction_back(store_target: str) -> None:
    with Store.open(store_target) as store:
        with pytest.raises(Boom), store.transaction():
            run = store.start_run("goal", "out.txt")
            store.checkpoint_step(run, step(1))
            raise Boom
        assert store.runs() == []


def test_a_step_for_a_missing_run_is_refused_outside_a_transaction(store_target: str) -> None:
    """Upstream's SQLite is built with foreign keys on: a step needs its run."""
    with Store.open(store_target) as store:
        for write in (
            lambda: store.checkpoint_step(41, step(1)),
            lambda: store.record(41, step(1)),
            lambda: store.checkpoint_steps(41, [step(1)]),
        ):
            with pytest.raises(RunNotFoundError):
                write()
        assert store.steps(41) == []
        assert store.checkpoint_events(41) == []


def terminate_other_backends(url: str) -> None:
    """Kill every other session on the test's database, as a server restart would."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
    finally:
        admin.dispose()


def test_a_dropped_connection_inside_a_transaction_raises_a_typed_error(pg_url: str) -> None:
    """The transaction cannot commit: it raises `StoreConnectionError` and nothing is kept."""
    with Store.open(pg_url) as store:
        with pytest.raises(StoreConnectionError) as caught, store.transaction():
            store.start_run("lost", "out.txt")
            terminate_other_backends(pg_url)
            store.start_run("after", "out.txt")
        assert caught.value.may_have_committed is False
        assert store.runs() == []  # the Store works again on a fresh connection


def test_a_dropped_connection_under_an_autocommitted_checkpoint_may_have_committed(
    pg_url: str,
) -> None:
    """A checkpoint outside a transaction is its own commit: cut while it runs, the caller is
    told it may have committed (here it waits on a row lock when its backend is killed)."""
    with Store.open(pg_url) as store:
        run = store.start_run("goal", "out.txt")
        blocker = create_engine(pg_url)
        errors: list[BaseException] = []
        try:
            with blocker.connect() as hold:
                hold.execute(text("SELECT id FROM runs WHERE id = :r FOR UPDATE"), {"r": run})

                def write() -> None:
                    try:
                        store.checkpoint_step(run, step(1))
                    except BaseException as exc:
                        errors.append(exc)

                worker = threading.Thread(target=write)
                worker.start()
                waiting = text(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO steps%'"
                )
                pid = None
                for _ in range(600):
                    # pg_stat_activity is read once per transaction: look from a fresh one
                    hold.execute(text("SELECT pg_stat_clear_snapshot()"))
                    pid = hold.execute(waiting).scalar()
                    if pid is not None:
                        break
                    time.sleep(0.05)
                assert pid is not None, "the checkpoint never waited on the lock"
                hold.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                worker.join(30)
                hold.rollback()
        finally:
            blocker.dispose()
        assert len(errors) == 1
        assert isinstance(errors[0], StoreConnectionError), repr(errors[0])
        assert errors[0].may_have_committed is True
        store.checkpoint_step(run, step(2))  # the pool gave the dead connection up
        assert [s.step for s in store.steps(run)] == [2]


CRASH_SCRIPT = r"""
import sys, time
mode, target, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
big = ("torn step " * 500_000)  # ~5 MB: more than SQLite's page cache, so pages spill
if mode == "store":
    from harness_store import Store, StepRecord
    store = Store.open(target)
    with store.transaction():
        store.checkpoint_step(run, StepRecord(2, "act", big, "", "", 5))
        store.memory_put("ws", "k", "from the dead step", run, 2)
        print("ready", flush=True)
        time.sleep(120)
else:  # the torn half, as upstream's checkpoint_step has it after its first statement
    sys.path.insert(0, sys.argv[4])
    from support import upstream_sql as up
    if up.is_postgres(target):
        import psycopg
        conn = psycopg.connect(up.pg_conninfo(target))
        conn.execute(up.INSERT_STEP.replace("?", "%s"), (run, 2, "act", big, "", "", 5))
    else:
        import sqlite3
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(up.INSERT_STEP, (run, 2, "act", big, "", "", 5))
    print("ready", flush=True)
    time.sleep(120)
"""


def _kill_inside_checkpoint(target: str, run: int, mode: str) -> None:
    """Run CRASH_SCRIPT until its write transaction holds the uncommitted step, then SIGKILL."""
    here = str(Path(__file__).resolve().parents[1])
    child = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, mode, target, str(run), here],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 60)
        line = child.stdout.readline() if ready else ""
        if line.strip() != "ready":
            child.kill()
            pytest.fail(f"the writer never got inside its transaction: {child.communicate()}")
        if not up.is_postgres(target):
            wal = Path(target + "-wal")
            assert wal.exists() and wal.stat().st_size > 1_000_000, "uncommitted pages on disk"
        # a second process may read the trace while the writer is inside its transaction
        with Store.open(target) as reader:
            assert reader.last_step(run) == 1
            assert len(reader.checkpoint_events(run)) == 1
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        for stream in (child.stdout, child.stderr):
            if stream:
                stream.close()
    assert child.returncode == -signal.SIGKILL


def test_a_process_killed_inside_checkpoint_step_leaves_no_torn_step(store_target: str) -> None:
    """Killed holding both rows (Store.transaction + checkpoint_step + a memory write), and
    killed holding only the step row (upstream's statement order, first half done)."""
    for mode in ("store", "raw"):
        with Store.open(store_target) as store:
            run = store.start_run(f"goal {mode}", "root")
            store.checkpoint_step(run, StepRecord(1, "act", "ok", "", "", 7))

        _kill_inside_checkpoint(store_target, run, mode)

        with Store.open(store_target) as store:
            assert store.last_step(run) == 1, mode
            assert store.steps(run) == [StepRecord(1, "act", "ok", "", "", 7)]
            assert [(e.step, e.kind) for e in store.checkpoint_events(run)] == [(1, "checkpoint")]
            assert store.spent_tokens(run) == 7
            assert store.memory_list("ws") == []
            # and the store takes the step again as if nothing had happened
            store.checkpoint_step(run, StepRecord(2, "act", "again", "", "", 1))
            assert store.last_step(run) == 2
        assert up.read_at(store_target, "checkpoint_events", run) == [
            (run, 1, "checkpoint", None),
            (run, 2, "checkpoint", None),
        ]
        if not up.is_postgres(store_target):
            assert raw(store_target, "PRAGMA integrity_check") == [("ok",)]


def test_a_transaction_rolls_every_write_back_on_an_exception(
    db: Store, ws: str, db_target: str
) -> None:
    keep = db.start_run("kept", "f")
    before = counts(db_target)
    runs_before = db.runs()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), db.transaction():
        run = db.start_run("goal", "root")
        child = db.start_child_run("c", "f", run, 1)
        db.set_provider(keep, "changed inside")
        db.checkpoint_step(run, StepRecord(1, "act", "ok", "", "", 5))
        db.checkpoint_steps(run, [StepRecord(2, "a", "", "", "", 1)] * 3)
        db.record_event(run, PolicyEvent.refusal(1, "read", ".env"))
        db.put_pending(run, 1, "write", "x", None)
        db.record_agent_event(AgentEvent.spawn(run, 1, child, "c"))
        db.record_mcp(run, McpEvent.connected("fs", "stdio"))
        db.record_context_event(run, ContextEvent.assembled(1, "d", 1))
        db.memory_put(ws, "k", "v", run, 1)
        db.record_run_policy(run, PERMISSIVE_POLICY)
        db.record_observations(run, [Observation(1, ObsKind.READ, "a", "b")])
        db.finish_run(run, "success")
        assert db.last_step(run) == 2  # reads inside the block see its writes
        raise Boom

    assert counts(db_target) == before
    assert db.provider(keep) is None
    assert db.runs() == runs_before
    assert runs_before[0] == keep


def test_nested_transactions_join_the_outer_one(db: Store, db_target: str) -> None:
    class Boom(Exception):
        pass

    before = counts(db_target)
    runs_before = up.read_at(db_target, "runs")
    with pytest.raises(Boom), db.transaction():
        run = db.start_run("goal", "root")
        with db.transaction():
            db.checkpoint_step(run, StepRecord(1, "inner", "ok", "", "", 1))
        # the inner block has ended, but nothing is committed until the outer one is
        assert up.read_at(db_target, "steps", run) == []
        raise Boom
    assert counts(db_target) == before
    assert up.read_at(db_target, "runs") == runs_before

    with db.transaction():
        run = db.start_run("goal", "root")
        with db.transaction():
            db.checkpoint_step(run, StepRecord(1, "inner", "ok", "", "", 1))
        db.checkpoint_step(run, StepRecord(2, "outer", "ok", "", "", 1))
        assert up.read_at(db_target, "runs") == runs_before, "invisible to others before commit"
    assert [r[0] for r in up.read_at(db_target, "steps", run)] == [1, 2]
    assert len(up.read_at(db_target, "checkpoint_events", run)) == 2


def test_another_threads_write_is_not_part_of_a_rolled_back_transaction(
    db: Store,
) -> None:
    other: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            other.append(db.start_run("other thread", "f"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    class Boom(Exception):
        pass

    runs_before = db.runs()
    thread = threading.Thread(target=write)
    with pytest.raises(Boom), db.transaction():
        db.start_run("mine", "f")
        thread.start()
        time.sleep(0.2)
        raise Boom
    thread.join(timeout=30)
    assert not errors
    assert db.runs() == other + runs_before
    assert [n.goal for n in db.tree(other[0])] == ["other thread"]


def test_eight_threads_checkpointing_through_one_store(db: Store, db_target: str) -> None:
    threads_n, steps_n = 8, 200
    runs = [db.start_run(f"thread {i}", "f") for i in range(threads_n)]
    shared = db.start_run("shared", "f")
    before = counts(db_target)
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n)

    def work(i: int) -> None:
        try:
            barrier.wait()
            for step in range(1, steps_n + 1):
                db.checkpoint_step(runs[i], StepRecord(step, f"t{i}", f"s{step}", "", "", i))
                if step % 50 == 0:
                    db.checkpoint_step(shared, StepRecord(step, f"t{i}", "", "", "", 1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    with up.connect(db_target) as conn:
        for i, run in enumerate(runs):
            steps = up.read(conn, "steps", run)
            assert [s[0] for s in steps] == list(range(1, steps_n + 1))
            assert {s[1] for s in steps} == {f"t{i}"}
            events = up.read(conn, "checkpoint_events", run)
            assert [(e[1], e[2]) for e in events] == [
                (s, "checkpoint") for s in range(1, steps_n + 1)
            ]
            assert up.read(conn, "spent_tokens", run) == [(i * steps_n,)]
        shared_steps = up.read(conn, "steps", shared)
        assert len(shared_steps) == threads_n * (steps_n // 50)
        assert sorted(e[1] for e in up.read(conn, "checkpoint_events", shared)) == sorted(
            s[0] for s in shared_steps
        )
    added = threads_n * steps_n + threads_n * (steps_n // 50)
    after = counts(db_target)
    assert after["steps"] == before["steps"] + added
    assert after["checkpoint_events"] == before["checkpoint_events"] + added


def test_a_write_waits_for_another_writer_instead_of_failing(tmp_path: Path) -> None:
    """0.12+: a file store has a 5 s busy timeout, so a moment of contention is a short wait,
    not an error."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO runs (goal, file) VALUES ('held', 'f')")
        committing = threading.Event()

        def commit() -> None:
            committing.set()  # before COMMIT: the store cannot write until COMMIT has begun
            other.execute("COMMIT")

        timer = threading.Timer(0.5, commit)
        timer.start()
        store.checkpoint_step(run, StepRecord(1, "a", "b"))
        returned_after_commit = committing.is_set()
        timer.join()
        other.close()
        assert returned_after_commit  # it waited for the other writer, and did not fail
        assert store.last_step(run) == 1
        assert [r for r in store.runs() if r != run] != []


def test_two_stores_on_one_database_write_concurrently(db_target: str) -> None:
    stores = [Store.open(db_target), Store.open(db_target)]
    try:
        runs = [stores[i % 2].start_run(f"writer {i}", "f") for i in range(4)]
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for step in range(1, 51):
                    stores[i % 2].checkpoint_step(runs[i], StepRecord(step, "a", "", "", "", 1))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        for run in runs:
            assert [r[0] for r in up.read_at(db_target, "steps", run)] == list(range(1, 51))
            assert len(up.read_at(db_target, "checkpoint_events", run)) == 50
    finally:
        for store in stores:
            store.close()
