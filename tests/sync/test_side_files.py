"""What a store leaves beside it and with which permissions: copy and sync targets as private
as their sources; the `-wal`, `-shm` and `-writers` side files with the store's mode and
group; the `-writers` queue file gone once the last writer closes, across processes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from support.synccheck import write_source

from harness_store import StepRecord, Store
from harness_store.sync import sync
from harness_store.transfer import copy_store

GROUP = 65534 if os.geteuid() == 0 else os.getegid()
"""A group other than root's for the group checks (root may give any)."""


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def private_store(path: Path) -> Path:
    write_source(path, runs=1)
    os.chmod(path, 0o600)
    return path


def test_a_copy_and_a_central_store_keep_a_private_sources_mode(tmp_path: Path) -> None:
    source = private_store(tmp_path / "agent.sqlite3")
    previous = os.umask(0o022)
    try:
        copy_store(source, tmp_path / "copy.sqlite3")
        sync([source], tmp_path / "central.sqlite3")
    finally:
        os.umask(previous)
    assert mode_of(tmp_path / "copy.sqlite3") == 0o600
    assert mode_of(tmp_path / "central.sqlite3") == 0o600


WRITER = textwrap.dedent(
    """
    import os, sys
    from harness_store import StepRecord, Store
    os.umask(0o022)
    path, rounds = sys.argv[1], int(sys.argv[2])
    for n in range(rounds):
        with Store.open(path) as store:
            run = store.start_run(f"p{os.getpid()}-{n}", "/x")
            store.checkpoint_steps(run, [StepRecord.new(1, "d", "ok")])
            if rounds == 1:
                print("open", flush=True)
                sys.stdin.readline()
    """
)


def writer(path: Path, rounds: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(rounds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_side_files_keep_the_stores_mode_and_group(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    with Store.open(path) as store:
        store.start_run("first", "/x")
    os.chmod(path, 0o660)
    os.chown(path, -1, GROUP)
    previous = os.umask(0o022)  # a writer's umask would make its new files 0o644
    try:
        with Store.open(path) as store:  # a writer with the store open, as in another process
            run = store.start_run("held", "/x")
            store.checkpoint_steps(run, [StepRecord.new(1, "d", "ok")])
            for suffix in ("-wal", "-shm", "-writers"):
                side = path.with_name(path.name + suffix)
                assert mode_of(side) == 0o660, suffix
                assert side.stat().st_gid == GROUP, suffix
    finally:
        os.umask(previous)


def test_the_writers_file_goes_with_the_last_writer(tmp_path: Path) -> None:
    path = tmp_path / "agent.sqlite3"
    queue = path.with_name(path.name + "-writers")
    with Store.open(path) as store:
        store.start_run("first", "/x")
    assert not queue.exists()
    held = [writer(path) for _ in range(3)]
    for proc in held:
        assert proc.stdout is not None and proc.stdout.readline() == "open\n"
    assert queue.exists()
    for proc in held[:2]:
        proc.communicate("\n", timeout=60)
        assert proc.returncode == 0
        assert queue.exists()  # one writer still has the store open
    held[2].communicate("\n", timeout=60)
    assert held[2].returncode == 0
    assert not queue.exists()


def test_writers_opening_and_closing_at_once_lose_nothing_and_leave_no_queue_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.sqlite3"
    with Store.open(path) as store:
        store.start_run("first", "/x")
    churn = [writer(path, rounds=15) for _ in range(4)]
    for proc in churn:
        proc.communicate(timeout=300)
        assert proc.returncode == 0
    assert not path.with_name(path.name + "-writers").exists()
    with Store.open(path, read_only=True) as store:
        assert len(store.runs()) == 1 + 4 * 15


def test_a_store_written_in_one_process_keeps_no_queue_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.sqlite3"
    with Store.open(path) as first, Store.open(path) as second:
        run = first.start_run("a", "/x")
        second.checkpoint_steps(run, [StepRecord.new(1, "d", "ok")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.sqlite3"]
