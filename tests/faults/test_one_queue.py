"""One writers' queue for every SQLite write of the package: `sync` into a store, its origin
mark written into a source and the upgrade take their turn in the queue as the Store's own
writes do (`dialects/sqlite_queue.py`), so Store writers in other processes beside them get
no lock error and wait no longer than the queue promises: one busy timeout bounds the wait
in the queue and on the lock together."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from support.processes import run_together, worker_argv
from support.synccheck import write_source

from harness_store import Store
from harness_store.dialects import backend_named
from harness_store.errors import StoreLockedError
from harness_store.formats import BUSY_TIMEOUT_SECONDS
from harness_store.schema import upgrade
from harness_store.sync import sync

WRITERS = 3
SECONDS = 3
"""Three Store writers checkpointing in tight loops for 3 s: long enough for a few dozen syncs
and upgrades to interleave with some thousand Store commits, short for the default tier."""


def test_sync_and_upgrade_beside_live_store_writers_get_no_lock_error(tmp_path: Path) -> None:
    path = tmp_path / "central.sqlite3"
    Store.open(path).close()
    sources = [tmp_path / f"s{n}.sqlite3" for n in range(2)]
    for n, source in enumerate(sources):
        write_source(source, runs=2, steps=3, tag=f"s{n}")
    failures: list[BaseException] = []
    passes = [0]
    done = threading.Event()

    def sync_and_upgrade() -> None:
        try:
            while not done.is_set():
                for source in sources:
                    write_source(source, runs=1, steps=2, tag=f"more{passes[0]}")
                sync([str(s) for s in sources], str(path), mark=True)
                report = upgrade(str(path), backup=False)
                assert not report.changed  # a no-op upgrade
                passes[0] += 1
        except BaseException as exc:  # the test's thread reports it
            failures.append(exc)

    beside = threading.Thread(target=sync_and_upgrade, name="sync-and-upgrade")
    beside.start()
    try:
        outputs = run_together(
            [worker_argv("tight_writer.py", path, SECONDS, "normal", "store")] * WRITERS,
            timeout=SECONDS + 120,
        )
    finally:
        done.set()
        beside.join()
    reports = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    for r in reports:
        print(f"calls {r['calls']:6} locked {r['locked']} max wait {r['max'] * 1e3:.0f} ms")
    print(f"sync and upgrade passes: {passes[0]}")
    assert failures == []
    assert passes[0] > 0
    assert [r["locked"] for r in reports] == [0] * WRITERS
    # The queue's promise: one busy timeout bounds a writer's wait in the queue and on the lock.
    assert max(r["max"] for r in reports) < BUSY_TIMEOUT_SECONDS
    with Store.open(path, read_only=True) as central:
        assert len(central.runs()) >= 2 * 2 * 2  # every source's runs, children too


def test_sync_waits_its_turn_in_the_writers_queue(tmp_path: Path) -> None:
    """While another writer holds the queue's turn (and no SQLite lock), sync's write waits
    in the queue and gives up after the busy timeout, writing nothing: it is queued like a
    Store's. (A sync beside the queue would take SQLite's lock at once and commit.)"""
    path = tmp_path / "central.sqlite3"
    Store.open(path).close()
    source = tmp_path / "s.sqlite3"
    write_source(source, runs=1, steps=2)
    queue = backend_named("sqlite").write_queue(make_url(f"sqlite:///{path}"))
    try:
        with queue.turn(), pytest.raises(StoreLockedError):
            sync([str(source)], str(path))
    finally:
        queue.close()
    with Store.open(path, read_only=True) as central:
        assert central.runs() == []
