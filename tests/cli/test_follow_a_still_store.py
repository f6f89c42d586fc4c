"""`harness-store events --follow` on a store nobody has open (read as a still file, with no
side files) prints what a writer that opens the store afterwards writes, and leaves no
`-wal`/`-shm` behind: a real command in its own process, and a writer in this one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness_store import Store
from harness_store.records import RunEvent

SIDE = ("-wal", "-shm")


def side_files(path: Path) -> list[str]:
    return [suffix for suffix in SIDE if path.with_name(path.name + suffix).exists()]


def holds_open(proc: subprocess.Popen[str], path: Path, timeout: float = 120) -> bool:
    """Poll until `proc` has `path` open (its connection, kept between polls, has read the
    still file); False when it exits first or the generous deadline passes."""
    target = str(path.resolve())
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            fds = Path(f"/proc/{proc.pid}/fd").iterdir()
            if any(_link(fd) == target for fd in fds):
                return True
        except OSError:
            pass  # the process is starting or ending
        time.sleep(0.01)
    return False


def _link(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:
        return ""


def test_follow_sees_a_writer_that_opens_a_still_store_later(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("goal", "a.md")
    assert side_files(path) == []
    # From cursor 0 (the store holds no event), not "from now": the writer's event counts
    # however soon after the command's start it commits.
    follow = subprocess.Popen(
        [sys.executable, "-m", "harness_store.cli", "events", str(path), "--follow",
         "--after", "0", "--limit", "1", "--interval", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holds_open(follow, path), follow.stderr.read() if follow.stderr else ""
        with Store.open(path) as writer:
            writer.put_event(RunEvent.new(run, 1, "step", note="written later"))
            out, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
    assert follow.returncode == 0, err
    assert "written later" in out
    assert side_files(path) == []
