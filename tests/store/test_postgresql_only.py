"""PostgreSQL-only behaviour: several processes checkpointing into one database, the
checkpoint-format guard on the server, and the server clock in upstream's text format."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from sqlalchemy import create_engine, text

from harness_store import ResumeError, StepRecord, Store

WRITER = textwrap.dedent(
    """
    import sys
    from harness_store import Store, StepRecord
    url, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with Store.open(url) as store:
        run = store.start_run(f"worker {worker}", "out.txt")
        for step in range(1, count + 1):
            record = StepRecord.new(step, f"w{worker} s{step}", "ok")
            store.checkpoint_step(run, record.with_trace("p" * 300, "{}", step))
        print(run)
    """
)


def test_four_processes_checkpointing_lose_nothing(pg_url: str) -> None:
    Store.open(pg_url).close()  # build the schema once, before the writers race
    workers, count = 4, 500
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, pg_url, str(w), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    runs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        runs.append(int(out.strip()))
    assert len(set(runs)) == workers
    with Store.open(pg_url) as store:
        for run in runs:
            steps = store.steps(run)
            assert [s.step for s in steps] == list(range(1, count + 1))
            events = store.checkpoint_events(run)
            assert [e.step for e in events] == list(range(1, count + 1))
            assert {e.kind for e in events} == {"checkpoint"}
            assert store.spent_tokens(run) == count * (count + 1) // 2
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM steps")).scalar() == workers * count
        orphans = conn.execute(
            text(
                "SELECT COUNT(*) FROM steps s WHERE NOT EXISTS (SELECT 1 FROM checkpoint_events c"
                " WHERE c.run_id = s.run_id AND c.step = s.step)"
            )
        ).scalar()
        assert orphans == 0
    engine.dispose()


def test_newer_checkpoint_format_is_refused_on_resume(pg_url: str) -> None:
    with Store.open(pg_url) as store:
        run = store.start_run("g", "f")
        store.check_resumable(run)
        engine = create_engine(pg_url)
        with engine.begin() as conn:
            conn.execute(text("UPDATE harness_user_version SET user_version = 8"))
        engine.dispose()
        try:
            store.check_resumable(run)
        except ResumeError as exc:
            assert "checkpoint format 8" in str(exc)
        else:
            raise AssertionError("a newer checkpoint format must be refused")


def test_server_clock_writes_upstreams_format(pg_url: str) -> None:
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
    with Store.open(pg_url) as store:
        run = store.start_run("g", "f")
        store.checkpoint_step(run, StepRecord.new(1, "a", "b").with_trace("", "", 3))
        store.memory_put("ws", "k", "v", run, 1)
        store.finish_run(run, "success")
        summary = store.run_summary(run)
        assert summary is not None and stamp.match(summary.finished_at)
        assert summary.duration_ms is not None and 0 <= summary.duration_ms < 60_000
        entry = store.memory_get("ws", "k")
        assert entry is not None and stamp.match(entry.created_at)
        started = store.tree(run)[0].started_at
        assert started is not None and stamp.match(started)
        assert 0 <= store.elapsed_secs(run) < 60


def test_a_store_outlives_its_server_connections_being_killed(pg_url: str) -> None:
    """A server restart or an idle-connection reaper drops the pooled connections; the next
    checkpoint, batch and read go through on fresh ones, and nothing is written twice. (The
    sessions are ended, as by a restart, before the next call: one told to end that has not
    yet gone is found by a ping only after a second idle, or else fails the call with a typed
    `StoreConnectionError`.)"""
    engine = create_engine(pg_url)
    kill = text(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    with Store.open(pg_url) as store:
        run = store.start_run("g", "f")
        for step in (1, 2, 3):
            store.checkpoint_step(run, StepRecord(step, "act", "ok", "p", "t", 1))
            with engine.begin() as conn:
                assert conn.execute(kill).all()  # the Store's pooled connection, at least
        store.checkpoint_steps(run, [StepRecord(9, "a", "b"), StepRecord(10, "a", "b")])
        with engine.begin() as conn:
            conn.execute(kill)
        assert [s.step for s in store.steps(run)] == [1, 2, 3, 9, 10]
        assert [e.step for e in store.checkpoint_events(run)] == [1, 2, 3, 9, 10]
    engine.dispose()


def test_an_interrupted_checkpoint_raises_its_own_error_and_spoils_no_connection(
    pg_url: str,
) -> None:
    """An exception raised while an autocommitted checkpoint is still on the wire (a signal
    handler's timeout) must surface as itself, and the busy connection must not go back to the
    pool in autocommit: the next transaction is still all-or-nothing."""
    engine = create_engine(pg_url)

    def count() -> int:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT COUNT(*) FROM checkpoint_events")).scalar_one())

    def busy_backends() -> int:
        with engine.connect() as conn:
            return int(conn.execute(text(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state = 'active' AND pid <> pg_backend_pid()"
            )).scalar_one())  # fmt: skip

    def alarm(*_: object) -> None:
        raise TimeoutError("alarm")

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        with Store.open(pg_url) as store:
            run = store.start_run("g", "f")
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "CREATE FUNCTION slow() RETURNS trigger AS $$ BEGIN "
                        "IF NEW.step = 42 THEN PERFORM pg_sleep(1.5); END IF; RETURN NEW; "
                        "END $$ LANGUAGE plpgsql"
                    )
                )
                conn.execute(
                    text(
                        "CREATE TRIGGER slow BEFORE INSERT ON checkpoint_events "
                        "FOR EACH ROW EXECUTE FUNCTION slow()"
                    )
                )
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(TimeoutError, match="alarm"):
                store.checkpoint_step(run, StepRecord(42, "a", "b"))
            deadline = time.monotonic() + 60  # the server finishes the interrupted statement
            while busy_backends() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not busy_backends()
            before = count()
            with pytest.raises(RuntimeError), store.transaction():
                store.checkpoint_step(run, StepRecord(5, "a", "b"))
                store.checkpoint_step(run, StepRecord(6, "a", "b"))
                raise RuntimeError("roll back")
            assert count() == before
            store.checkpoint_step(run, StepRecord(7, "a", "b"))
            assert count() == before + 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        engine.dispose()
