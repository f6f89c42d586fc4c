"""`follow` holds its destination as `sync` does: made and prepared once, and every pass goes
through it. Before, each pass made a connector of its own over the follower's engine, so a
follower connected to its centre anew at every pass (its kept connections, or on SQLite its
one connection, closed with each pass's connector)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool
from support.synccheck import write_source

from harness_store import StepRecord, Store
from harness_store.sync import follow
from harness_store.sync.follow_report import FollowEvent, FollowPass

PASSES = 6
"""Passes the follower makes, each over a source that changed."""

DEADLINE = 120.0
"""Seconds to wait for a pass before the test fails (the machine may be loaded)."""


@contextmanager
def connections_made(dest: str) -> Iterator[list[object]]:
    """Every driver connection this process opens to the store at `dest` during the body
    (the sources are SQLite files elsewhere; a PostgreSQL centre is the only server)."""
    made: list[object] = []
    wanted = None if "://" in dest else str(Path(dest).resolve())

    def connected(dbapi_connection: Any, record: object) -> None:
        if wanted is None:
            if not isinstance(dbapi_connection, sqlite3.Connection):
                made.append(dbapi_connection)
            return
        if isinstance(dbapi_connection, sqlite3.Connection):
            files = dbapi_connection.execute("PRAGMA database_list").fetchall()
            if any(row[2] and str(Path(row[2]).resolve()) == wanted for row in files):
                made.append(dbapi_connection)

    event.listen(Pool, "connect", connected)
    try:
        yield made
    finally:
        event.remove(Pool, "connect", connected)


def test_a_follower_connects_to_its_centre_once_for_all_its_passes(
    store_target: str, tmp_path: Path
) -> None:
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=1, steps=1)
    stop = threading.Event()
    passes: list[FollowPass] = []
    lock = threading.Condition()

    def on_event(event: FollowEvent) -> None:
        if isinstance(event, FollowPass) and event.rows:
            with lock:
                passes.append(event)
                lock.notify_all()

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + DEADLINE
        with lock:
            while len(passes) < count:
                assert lock.wait(max(0.0, deadline - time.monotonic())), f"{len(passes)} passes"

    failed: list[BaseException] = []

    def run() -> None:
        try:
            follow([source], store_target, stop=stop, on_event=on_event)
        except BaseException as exc:
            failed.append(exc)

    with connections_made(store_target) as made:
        follower = threading.Thread(target=run, name="test-follower")
        follower.start()
        try:
            wait_for(1)
            after_first = len(made)
            for n in range(2, PASSES + 1):
                with Store.open(source) as store:
                    run_id = store.start_run(f"goal {n}", f"/src/{n}.rs")
                    store.checkpoint_steps(run_id, [StepRecord.new(1, f"d{n}", "ok")])
                wait_for(n)
        finally:
            stop.set()
            follower.join(DEADLINE)
    assert not failed, failed
    assert after_first >= 1
    assert len(made) == after_first, (
        f"{len(made)} connections to the centre for {PASSES} passes, {after_first} by the first"
    )
