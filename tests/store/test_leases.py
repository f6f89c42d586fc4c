"""Leases on both backends: acquired, renewed and released; a dead owner's lease taken over at
once; a taken-over driver checkpointing nothing, under a running driver in another process
too; contending processes seeing exactly one winner; a forked child being another driver."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from sqlalchemy import func, insert, select
from support.processes import child_python
from support.rows import count, execute

from harness_store import (
    AssistantTurn,
    LeaseConflictError,
    StepRecord,
    Store,
)
from harness_store import models as m
from harness_store.errors import InvalidValueError

# --- leases ----------------------------------------------------------------------------------


def test_a_lease_is_acquired_renewed_and_released(store: Store, store_target: str) -> None:
    run = store.start_run("port", "x")
    with store.acquire_lease(run, 300) as lease:
        assert lease.generation == 1
        row = store.run_lease(run)
        assert row is not None and row.owner == store.owner() and not row.expired
        assert row.ttl_secs == 300 and row.expires_at > row.renewed_at
        again = store.acquire_lease(run, 300)  # re-acquiring our own keeps the generation
        assert again.generation == 1
        lease.renew()
        with Store.open(store_target) as other:
            assert other.owner() != store.owner()
            with pytest.raises(LeaseConflictError) as refused:
                other.acquire_lease(run, 300)
            assert refused.value.owner == store.owner()
            assert refused.value.expires_at == store.run_lease(run).expires_at  # type: ignore[union-attr]
    assert store.run_lease(run) is None  # released: no row, anyone may acquire


@pytest.mark.parametrize("ttl", [2**40, 2**63 - 1, -1])
def test_a_ttl_whose_expiry_no_stamp_can_hold_is_refused_at_the_door(
    store: Store, store_target: str, ttl: int
) -> None:
    """Before: `acquire_lease(run, 2**40)` was saved, then every read of the lease
    (`run_lease`, another owner's `acquire_lease`) raised a raw OverflowError: its expiry,
    `renewed_at + ttl_secs`, is past the year 9999, which neither io-harness's SQL nor Python
    writes (and a negative ttl is no `'+N seconds'` modifier: io-harness computes no expiry).
    Now refused typed, before anything is written, on a free run and on one already held."""
    free, held = store.start_run("free", "x"), store.start_run("held", "x")
    store.acquire_lease(held, 60)
    before = store.run_lease(held)
    for run in (free, held):
        with pytest.raises(InvalidValueError, match="ttl_secs"):
            store.acquire_lease(run, ttl)
    assert store.run_lease(free) is None
    assert store.run_lease(held) == before
    longest = 10**11  # about 3,170 years: an expiry in the 52nd century, which reads back
    store.acquire_lease(free, longest)
    row = store.run_lease(free)
    assert row is not None and row.ttl_secs == longest and row.expires_at[:2] == "51"
    with Store.open(store_target) as other, pytest.raises(LeaseConflictError) as refused:
        other.acquire_lease(free, 60)
    assert refused.value.expires_at == row.expires_at


@pytest.mark.slow_on("postgresql")
def test_a_taken_over_driver_checkpoints_nothing(store: Store, store_target: str) -> None:
    run = store.start_run("lost", "x")
    store.acquire_lease(run, 0)  # lapsed as soon as written
    row = store.run_lease(run)
    assert row is not None and row.expired
    store.stage_step_turn(run, AssistantTurn.new(1, "never written", []))
    with Store.open(store_target) as other:
        taken = other.acquire_lease(run, 60)
        assert taken.generation == 2
        with pytest.raises(LeaseConflictError) as lost:
            store.checkpoint_step(run, StepRecord.new(1, "stale", "no"))
        assert lost.value.owner == other.owner()
        with pytest.raises(LeaseConflictError):
            store.checkpoint_steps(run, [StepRecord.new(1, "stale", "no")])
        with pytest.raises(LeaseConflictError):
            store.renew_lease(run, 1)
        assert (
            count(store, m.Step, run_id=run),
            count(store, m.CheckpointEvent, run_id=run),
            count(store, m.StepTurn, run_id=run),
        ) == (0, 0, 0)
        other.checkpoint_step(run, StepRecord.new(1, "new owner", "ok"))
        store.release_lease(run, 1)  # no longer ours: a no-op
        assert [s.decision for s in store.steps(run)] == ["new owner"]
        assert other.run_lease(run).generation == 2  # type: ignore[union-attr]


def test_a_dead_owners_lease_is_taken_over_at_once(store: Store) -> None:
    run = store.start_run("crashed", "x")
    gone = subprocess.Popen(["true"])  # a process that has ended: its pid is nobody's
    assert gone.wait(timeout=60) == 0
    owner = f"{gone.pid}-1-0"
    execute(store, insert(m.RunLease).values(run_id=run, owner=owner, generation=4, ttl_secs=3600))
    assert store.acquire_lease(run, 60).generation == 5


CONTENDER = """
import json, sys
from harness_store import LeaseConflictError, Store
target, run = sys.argv[1], int(sys.argv[2])
with Store.open(target) as st:
    print("ready", flush=True)
    sys.stdin.readline()  # go
    try:
        lease = st.acquire_lease(run, 60)
        print(json.dumps({"won": lease.generation, "owner": st.owner()}), flush=True)
    except LeaseConflictError as exc:
        print(json.dumps({"lost": exc.owner}), flush=True)
    sys.stdin.readline()  # alive, holding what it won, until every contender has answered
"""
"""A contender: opens the store, says `ready`, tries to take the run's lease at `go`, says
what came of it, and lives on until its stdin ends."""


@pytest.mark.slow_on("postgresql")
def test_contending_processes_see_exactly_one_winner(store: Store, store_target: str) -> None:
    """Four processes, each with its store open, try at one `go`; every one stays alive until
    all have answered, so none can take over the lease of a winner that has already exited."""
    run = store.start_run("contended", "x")
    procs = [
        child_python(CONTENDER, store_target, str(run), stdin=subprocess.PIPE) for _ in range(4)
    ]
    results = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.stderr
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            results.append(json.loads(line))
        for proc in procs:
            _, err = proc.communicate(timeout=120)  # closes stdin: the contender ends
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    winners = [r for r in results if "won" in r]
    assert len(winners) == 1, results
    assert {r["lost"] for r in results if "lost" in r} == {winners[0]["owner"]}


DRIVER = """
import sys, threading
from harness_store import LeaseConflictError, StepRecord, Store
target, run = sys.argv[1], int(sys.argv[2])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
with Store.open(target) as st:
    lease = st.acquire_lease(run, 0)  # lapsed at once: the other side may take it over any time
    print("ready", flush=True)
    step = 0
    while not stop.is_set():  # until the test has made its take-overs
        step += 1
        try:
            st.checkpoint_step(run, StepRecord.new(step, f"gen {lease.generation}", "ok"))
        except LeaseConflictError:
            while True:
                try:
                    lease = st.acquire_lease(run, 0)  # take it back, and go on
                    break
                except LeaseConflictError:
                    pass
"""


@pytest.mark.slow_on("postgresql")
def test_take_overs_under_a_running_driver_leave_no_late_step(
    store: Store, store_target: str
) -> None:
    """The generation check holds under concurrency: a driver checkpointing in a tight loop in
    another process, and this one taking its run over again and again (each side takes it back),
    never leaves a step of an old generation committed after the take-over that ended it."""
    run = store.start_run("raced", "x")
    driver = child_python(DRIVER, store_target, str(run), stdin=subprocess.PIPE)
    assert driver.stdout is not None and driver.stdout.readline().strip() == "ready"
    takeovers: list[tuple[int, int]] = []
    deadline = time.time() + 300  # only a bound: the loop ends on what it has seen
    written = 0  # the driver's steps committed so far
    while time.time() < deadline and (len(takeovers) < 10 or written < 20):
        try:
            lease = store.acquire_lease(run, 0)
        except LeaseConflictError:
            continue
        with store.engine.connect() as conn:
            seen = conn.execute(select(func.max(m.Step.id))).scalar() or 0
            written = count(store, m.Step, run_id=run)
        takeovers.append((lease.generation, seen))
        time.sleep(0.002)
    _, err = driver.communicate("stop\n", timeout=60)
    assert driver.returncode == 0, err
    with store.engine.connect() as conn:
        rows = conn.execute(select(m.Step.id, m.Step.decision).where(m.Step.run_id == run)).all()
    assert len(takeovers) >= 10 and len(rows) >= 20, (len(takeovers), len(rows))
    late = [
        (step_id, decision, generation)
        for generation, seen in takeovers
        for step_id, decision in rows
        if step_id > seen and int(decision.split()[1]) < generation
    ]
    assert late == []
    assert count(store, m.CheckpointEvent, run_id=run) == len(rows)


def test_a_forked_child_is_another_driver(store_target: str) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    with Store.open(store_target) as store:
        run = store.start_run("forked", "x")
        store.acquire_lease(run, 3600)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.close(read)
                try:
                    store.acquire_lease(run, 60)
                    answer = "taken"
                except LeaseConflictError:
                    answer = "refused"  # the parent is alive and holds it
                os.write(write, f"{answer} {store.owner()}".encode())
            finally:
                os._exit(0)
        os.close(write)
        answer, owner = os.read(read, 1000).decode().split()
        os.close(read)
        os.waitpid(pid, 0)
        assert answer == "refused" and owner != store.owner()
        store.checkpoint_step(run, StepRecord.new(1, "parent", "ok"))  # still the parent's
        assert [s.decision for s in store.steps(run)] == ["parent"]
