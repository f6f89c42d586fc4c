"""Sync against real processes: a sync SIGKILLed at random points and run again, and a sync
of a store that another process keeps writing through `Store`."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from support.synccheck import mirror_problems, write_source

from harness_store import StepRecord, Store
from harness_store.engine import make_engine, read_only_url
from harness_store.models import CheckpointEvent, Step, table_of
from harness_store.sync import origin_runs, sync

SYNC = """
import sys
from harness_store.sync import sync
def progress(source, done, total, rows):
    print("progress", done, rows, flush=True)
sync(sys.argv[2:], sys.argv[1], batch_size=200, progress=progress)
print("done", flush=True)
"""

WRITER = """
import sys, time
from harness_store import StepRecord, Store
path, seconds = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + seconds
with Store.open(path, synchronous="normal") as store:
    print("ready", flush=True)
    n = 0
    while time.monotonic() < end:
        run = store.start_run(f"live {n}", "/live.rs")
        for step in range(1, 21):
            record = StepRecord.new(step, f"d{step}", "ok").with_trace("p", "t", 1)
            store.checkpoint_step(run, record)
        store.finish_run(run, "success")
        n += 1
print("wrote", n, flush=True)
"""


def grow(path: Path, run: int, steps: int) -> None:
    with Store.open(path, synchronous="normal") as store:
        last = store.last_step(run) or 0
        store.checkpoint_steps(
            run, [StepRecord.new(last + i, "more", "ok") for i in range(1, steps + 1)]
        )


@pytest.mark.slow_on("sqlite")
def test_sigkill_at_random_points_then_resync_completes(store_target: str, tmp_path: Path) -> None:
    sources = []
    for n in range(4):
        path = tmp_path / f"s{n}.sqlite3"
        write_source(path, runs=4, steps=600, tag=f"s{n}")
        sources.append(path)
    rng = random.Random(19)
    killed = 0
    for round_ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", SYNC, store_target, *map(str, sources)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        for _ in range(rng.randrange(1, 60)):  # a random number of batches in
            if not proc.stdout.readline():
                break
        time.sleep(rng.uniform(0, 0.02))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=60)
        grow(sources[round_ % 4], 1, 50)  # the sources go on meanwhile
    assert killed >= 2, "the sync finished before every kill: make the sources bigger"
    sync(sources, store_target)
    for path in sources:
        assert mirror_problems(store_target, path) == [], path
    assert sync(sources, store_target).rows == 0


def consistent(dest: str) -> list[str]:
    """Runs whose steps and checkpoint markers disagree (each `checkpoint_step` commits both
    together, so a consistent snapshot never splits them)."""
    steps, events = table_of(Step), table_of(CheckpointEvent)
    engine = make_engine(read_only_url(dest))
    try:
        with engine.connect() as conn:
            per_step = dict(
                conn.execute(select(steps.c.run_id, func.count()).group_by(steps.c.run_id)).all()
            )
            per_event = dict(
                conn.execute(
                    select(events.c.run_id, func.count())
                    .where(events.c.kind == "checkpoint")
                    .group_by(events.c.run_id)
                ).all()
            )
    finally:
        engine.dispose()
    return [
        f"run {r}: {n} steps, {per_event.get(r)} markers"
        for r, n in per_step.items()
        if per_event.get(r) != n
    ]


@pytest.mark.slow_on("postgresql")
def test_a_live_writer_is_read_as_a_snapshot_and_caught_up_next_time(
    store_target: str, tmp_path: Path
) -> None:
    src = tmp_path / "live.sqlite3"
    write_source(src, runs=1)
    sync([src], store_target)  # the destination's schema, built before the race starts
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(src), "6"], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "ready"
    syncs = 0
    while writer.poll() is None:
        sync([src], store_target)
        syncs += 1
        assert consistent(store_target) == []
    assert writer.returncode == 0
    assert syncs >= 2
    sync([src], store_target)
    assert mirror_problems(store_target, src) == []
    assert sync([src], store_target).rows == 0
    runs = origin_runs(store_target, str(src.resolve()))
    assert runs is not None and len(runs) > 10
