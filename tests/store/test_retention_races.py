"""Retention against a second writer (real processes, both backends): a prune decides and
deletes each unit in one transaction under the lock it deletes with, so a run that another
process resumes (sets `running` and leases) while the prune runs is kept, whole; and lease and
status writes on a run that is gone raise `RunNotFoundError` and write nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select

from harness_store import Store
from harness_store.errors import RunNotFoundError
from harness_store.models import Base
from harness_store.records import StepRecord
from harness_store.store.retention_rows import RUN_TABLES

WORKER = Path(__file__).with_name("retention_worker.py")
CLI = [sys.executable, "-m", "harness_store.cli"]
RUNS = 80
ROUNDS = 3


def url_of(target: str) -> str:
    return target if "://" in target else f"sqlite:///{target}"


def fill(target: str, *, sessions: bool) -> list[int]:
    """RUNS completed runs of three checkpointed steps each, one per session or alone."""
    runs = []
    with Store.open(target, backup=False) as store, store.transaction():
        for i in range(RUNS):
            run = store.start_run(f"goal {i}", "plan.toml")
            for step in range(1, 4):
                store.checkpoint_step(run, StepRecord(step, "decide", "ok", tokens=10))
            store.finish_run(run, "success")
            if sessions:
                session = store.create_session(f"/ws/{i}")
                store.record_turn(session, None, run, f"prompt {i}")
            runs.append(run)
    return runs


def rows_of(target: str, run: int) -> dict[str, int]:
    """Rows naming `run` in the runs table and every run-keyed table."""
    engine = create_engine(url_of(target))
    found = {}
    with engine.connect() as conn:
        for name, key in [("runs", "id"), *RUN_TABLES, ("session_turns", "run_id")]:
            t = Base.metadata.tables[name]
            n = int(
                conn.execute(select(func.count()).select_from(t).where(t.c[key] == run)).scalar()
                or 0
            )
            if n:
                found[name] = n
    engine.dispose()
    return found


def race(
    target: str, runs: list[int], prune: list[str]
) -> tuple[set[int], set[int], dict[str, object]]:
    """Start a resumer taking the runs newest first once the prune has deleted its first
    unit, and the prune; wait for both; what the resumer resumed and found gone, and the
    prune's JSON."""
    resumer = subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            "resume",
            target,
            "0.001",
            str(len(runs)),
            *map(str, reversed(runs)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert resumer.stdout is not None and resumer.stdout.readline().strip() == "ready"
    pruner = subprocess.run(
        [*CLI, "prune", target, *prune, "--yes", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out, _ = resumer.communicate(timeout=120)
    assert resumer.returncode == 0
    assert pruner.returncode == 0, pruner.stderr
    resumed = {int(line.split()[1]) for line in out.splitlines() if line.startswith("resumed")}
    gone = {int(line.split()[1]) for line in out.splitlines() if line.startswith("gone")}
    assert len(resumed) + len(gone) == len(runs)
    return resumed, gone, json.loads(pruner.stdout)


@pytest.mark.slow  # three rounds of a real race between processes: the soak finds the window
@pytest.mark.parametrize("unit", ["sessions", "runs"])
def test_a_run_resumed_while_the_prune_runs_is_kept_whole(store_target: str, unit: str) -> None:
    prune = ["--before", "9999-01-01"] + (["--runs"] if unit == "runs" else [])
    for round_ in range(ROUNDS):
        if round_:  # a fresh store each round: the survivors of the last one are still running
            with Store.open(store_target, backup=False) as store:
                store.prune_runs(before="9999-01-01", statuses=("completed", "failed"))
                for run in store.runs():
                    store.set_status(run, "completed")
                    store.delete_session(store.turn_for_run(run) or 0)
        runs = fill(store_target, sessions=unit == "sessions")
        resumed, gone, report = race(store_target, runs, prune)
        with Store.open(store_target, backup=False) as store:
            for run in sorted(resumed):
                # Resumed before the prune reached it: kept, still running and leased.
                assert store.status(run) == "running", (round_, run, report)
                lease = store.run_lease(run)
                assert lease is not None and not lease.expired, (round_, run)
                assert len(store.steps(run)) == 3
                if unit == "sessions":
                    turn = store.turn_for_run(run)
                    assert turn is not None and store.session_turn(turn) is not None
            for run in sorted(gone):
                # Deleted before the resumer reached it: nothing of it anywhere (no lease row).
                assert rows_of(store_target, run) == {}, (round_, run)
            assert set(store.runs()) & set(runs) == resumed
        assert gone, "the resumer started only once the prune had ended: no race happened"


def test_status_writes_on_a_missing_run_raise_and_write_nothing(
    store_target: str,
) -> None:
    with Store.open(store_target, backup=False) as store:
        run = store.start_run("goal", "plan.toml")
        session = store.create_session("/ws")
        store.record_turn(session, None, run, "hi")
        store.finish_run(run, "success")
        store.delete_session(session)
        missing = run + 1000
        for gone in (run, missing):
            with pytest.raises(RunNotFoundError):
                store.renew_lease(gone, 1)
            with pytest.raises(RunNotFoundError):
                store.set_status(gone, "running")
            with pytest.raises(RunNotFoundError):
                store.set_provider(gone, "openai")
            with pytest.raises(RunNotFoundError):
                store.finish_run(gone, "awaiting_approval")
            assert store.run_lease(gone) is None
            assert store.status(gone) is None
        assert rows_of(store_target, run) == {}


def test_a_lease_of_a_run_not_in_the_store_is_upstreams_and_check_names_it(
    store_target: str,
) -> None:
    """io-harness 0.66 leases a run id that is not (or not yet) in the store: a harness may
    hold a run before it writes it (`tests/interop/test_run_api_oracle.py` holds run 6 of an empty
    store against upstream's own script). So the Store takes such a lease too; one left on a
    run that is gone is what `check` names and `repair` drops."""
    with Store.open(store_target, backup=False) as store:
        lease = store.acquire_lease(4242, 60)
        assert lease.generation == 1 and store.run_lease(4242) is not None
        found = [f for f in store.check().findings if "4242" in str(f)]
        assert found, store.check()
        store.repair()
        assert store.run_lease(4242) is None


@pytest.mark.slow_on("postgresql")
def test_sweep_sessions_keeps_a_run_resumed_before_it_commits(store_target: str) -> None:
    """A resumer holds its transaction open (status set, lease taken, not committed) while a
    sweep in another process starts: the sweep waits for it and keeps the session."""
    runs = fill(store_target, sessions=True)[:3]
    sweep = (
        "import sys, json\n"
        "from harness_store import Store\n"
        "with Store.open(sys.argv[1], backup=False, busy_timeout=60) as s:\n"
        "    p = s.sweep_sessions('9999-01-01')\n"
        "    print(json.dumps({'sessions': p.sessions, 'refused': p.refused}))\n"
    )
    with Store.open(store_target, backup=False) as resumer:
        with resumer.transaction():
            resumer.set_status(runs[-1], "running")
            resumer.acquire_lease(runs[-1], 600)
            sweeper = subprocess.Popen(
                [sys.executable, "-c", sweep, store_target], stdout=subprocess.PIPE, text=True
            )
            time.sleep(1.5)  # the sweep is waiting on the resumer's lock (or would read past it)
            assert sweeper.poll() is None
        out, _ = sweeper.communicate(timeout=120)
        assert sweeper.returncode == 0
        swept = json.loads(out)
        assert swept["sessions"] == RUNS - 1 and len(swept["refused"]) == 1
        assert resumer.status(runs[-1]) == "running"
        assert resumer.run_lease(runs[-1]) is not None
        assert len(resumer.steps(runs[-1])) == 3
