"""An export killed at random points (a real `harness-store export parquet` process,
SIGKILL) leaves the previous dataset readable and whole, and the next export completes it —
among them one writing again the rows of a run archived in place."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest
from support.clirun import COMMAND, environ

from harness_store import StepRecord, Store
from harness_store.analytics import TABLES
from harness_store.analytics.dataset import MANIFEST, read_dataset, read_manifest
from harness_store.analytics.lock import LOCK

KILLS = 4


def grow(store: Store, runs: list[int], first: int, count: int) -> None:
    for run in runs:
        store.checkpoint_steps(
            run,
            (StepRecord.new(i, f"decision {i}", "r" * 200).with_trace("p" * 300, "t:{}", i)
             for i in range(first, first + count)),
        )  # fmt: skip


def dataset(directory: Path) -> dict[str, pa.Table]:
    return {table: read_dataset(directory, table) for table in TABLES}


def export(target: str, directory: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*COMMAND, "export", "parquet", target, str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environ(),
    )


@pytest.mark.slow
def test_a_killed_export_leaves_the_previous_dataset_and_the_next_completes_it(
    store_target: str, tmp_path: Path
) -> None:
    directory = tmp_path / "ds"
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    with Store.open(store_target) as store:
        runs = [store.start_run(f"goal {n}", "f.rs") for n in range(3)]
        session = store.create_session("/ws")
        store.record_turn(session, None, runs[1], "a prompt")
        grow(store, runs, 1, 3000)
        started = time.monotonic()
        done = export(store_target, directory)
        assert done.wait(timeout=600) == 0, done.stderr.read() if done.stderr else ""
        took = time.monotonic() - started
        killed = 0
        for round_ in range(KILLS):
            before = dataset(directory)
            grow(store, runs, 3001 + 1000 * round_, 1000)  # new work for this export
            store.finish_run(runs[round_ % len(runs)], "success")
            if round_ == 1:  # rows already exported change in place: written again
                store.archive_session(session)
            after = {table: store.arrow(table) for table in TABLES}
            process = export(store_target, directory)
            time.sleep(chance.uniform(0.1, took * 0.9))
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                killed += 1
            process.wait(timeout=60)
            now = dataset(directory)  # readable, and one whole dataset: the old or the new
            matches_before = all(now[t].equals(before[t]) for t in TABLES)
            matches_after = all(now[t].equals(after[t]) for t in TABLES)
            assert matches_before or matches_after, f"seed {seed}, round {round_}"
        assert killed, f"no export was stopped before it finished (seed {seed}, {took:.1f} s)"

        done = export(store_target, directory)
        assert done.wait(timeout=600) == 0
        final = dataset(directory)
        for table in TABLES:
            assert final[table].equals(after[table]), (table, seed)
        manifest = read_manifest(directory)
        listed = {f["path"] for t in manifest["tables"].values() for f in t["files"]}
        on_disk = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}
        kept = {MANIFEST, LOCK, manifest["run_marks"]}  # the lock file stays (analytics.lock)
        assert on_disk == listed | kept, f"leftovers of a killed export (seed {seed})"
