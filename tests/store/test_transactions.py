"""`Store.transaction()` on both backends: each Store call inside it is atomic on its own (a
savepoint), a caught failure of one call keeps the others, nested blocks are savepoints, and a
transaction that cannot commit raises. Foreign keys hold on both backends, as upstream's."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import create_engine, text

from harness_store import StepRecord, Store
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
