"""Maintenance beside live writers on SQLite: `copy` (of the store as the source), a no-op
`upgrade`, `check --repair` and `compact`, each run over and over while writer processes
checkpoint in tight loops — a harness_store `Store` (in the writers' queue) and a plain
connection as io-harness writes (busy timeout, `BEGIN IMMEDIATE`). No writer ever gets a lock
error. `copy` and a no-op upgrade never take the store's write lock at all: a writer that does
not wait for it (busy timeout 0) is never refused beside them (a read in WAL mode blocks no
writer; it only holds the WAL's checkpoint back until it ends)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.processes import run_together, worker_argv

from harness_store import StepRecord, Store
from harness_store.schema import upgrade
from harness_store.transfer import copy_store

SECONDS = 3


def written(path: Path, runs: int = 40) -> None:
    """A store of finished runs with steps, and a session of more deleted again (free pages)."""
    with Store.open(path, backup=False) as store:
        session = store.create_session("/ws")
        for i in range(runs):
            run = store.start_run(f"goal {i}", "plan.toml")
            for step in range(1, 4):
                store.checkpoint_step(run, StepRecord(step, "d", os.urandom(2000).hex(), tokens=1))
            store.finish_run(run, "success")
            if i % 2:
                store.record_turn(session, None, run, "prompt")
        store.delete_session(session)


def copy_of(path: Path) -> Callable[[int], None]:
    def copy(n: int) -> None:
        copy_store(path, path.with_name(f"copy-{n}.sqlite3"))
        path.with_name(f"copy-{n}.sqlite3").unlink()

    return copy


def noop_upgrade(path: Path) -> Callable[[int], None]:
    def again(n: int) -> None:
        assert not upgrade(str(path), backup=False).changed

    return again


def repair(path: Path) -> Callable[[int], None]:
    def again(n: int) -> None:
        with Store.open(path, upgrade=False, backup=False) as store:
            store.repair()

    return again


def compact(path: Path) -> Callable[[int], None]:
    def again(n: int) -> None:
        with Store.open(path, upgrade=False, backup=False) as store:
            store.compact(slice_pages=8)
            session = store.create_session("/again")  # something to give back next time
            run = store.start_run("again", "plan.toml")
            store.checkpoint_step(run, StepRecord(1, "d", os.urandom(20_000).hex(), tokens=1))
            store.finish_run(run, "success")
            store.record_turn(session, None, run, "prompt")
            store.delete_session(session)

    return again


COMMANDS = {"copy": copy_of, "upgrade": noop_upgrade, "repair": repair, "compact": compact}


def beside(work: Callable[[int], None], argvs: list[list[str]]) -> tuple[list[dict], int]:
    """Run `work` over and over in a thread while the writer processes `argvs` run; their
    reports and how many times `work` ran."""
    failures: list[BaseException] = []
    passes = [0]
    done = threading.Event()

    def loop() -> None:
        try:
            while not done.is_set():
                work(passes[0])
                passes[0] += 1
        except BaseException as exc:  # the test's thread reports it
            failures.append(exc)

    thread = threading.Thread(target=loop, name="maintenance")
    thread.start()
    try:
        outputs = run_together(argvs, timeout=SECONDS + 120)
    finally:
        done.set()
        thread.join()
    assert failures == []
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs], passes[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_live_writer_gets_a_lock_error_beside_maintenance(tmp_path: Path, command: str) -> None:
    path = tmp_path / "runs.sqlite3"
    written(path)
    writers = [
        worker_argv("tight_writer.py", path, SECONDS, "normal", kind) for kind in ("store", "plain")
    ]
    reports, passes = beside(COMMANDS[command](path), writers)
    assert passes > 0
    assert [r["locked"] for r in reports] == [0, 0], reports


@pytest.mark.parametrize("command", ["copy", "upgrade"])
def test_copy_and_a_noop_upgrade_never_take_the_write_lock(tmp_path: Path, command: str) -> None:
    path = tmp_path / "runs.sqlite3"
    written(path)
    reports, passes = beside(
        COMMANDS[command](path), [worker_argv("no_wait_writer.py", path, SECONDS)]
    )
    assert passes > 0 and reports[0]["calls"] > 0
    assert reports[0]["locked"] == 0, reports
