"""Every command on a path that is no regular file — a FIFO, a socket, a device, a directory
— or on a missing file returns at once with exit 3 (a FIFO used to block forever: the
header sniff opened it and waited for a writer)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import environ
from support.tiers import sampled

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("inspect", "{db}"),
    ("runs", "{db}"),
    ("trace", "{db}", "1"),
    ("tree", "{db}", "1"),
    ("memory", "{db}", "/repo"),
    ("size", "{db}"),
    ("spend", "{db}"),
    ("events", "{db}"),
    ("patch", "{db}", "1"),
    ("upgrade", "{db}"),
    ("approve", "{db}", "1"),
    ("answer", "{db}", "1", "yes"),
    ("prune", "{db}", "--before", "2000-01-01", "--dry-run"),
    ("compact", "{db}", "--yes"),
    ("copy", "{db}", "{other}"),
    ("sync", "{db}", "{other}"),
    ("origins", "{db}"),
)
"""Every command that takes a store path."""

ALARM = 20
"""Seconds a command may run before the test calls it blocked (it takes well under one)."""


@pytest.fixture
def special_paths(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A FIFO, a listening Unix socket, a character device, a directory, a missing file."""
    fifo = tmp_path / "fifo.sqlite3"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock.sqlite3"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(sock_path))
    sock.listen()
    directory = tmp_path / "dir.sqlite3"
    directory.mkdir()
    try:
        yield {
            "fifo": fifo,
            "socket": sock_path,
            "device": Path("/dev/null"),
            "directory": directory,
            "missing": tmp_path / "missing.sqlite3",
        }
    finally:
        sock.close()


def run_many(lines: list[list[str]]) -> list[dict[str, object]]:
    """Each command line's exit code and stderr, run one after another in one child process
    (`many.py`), each stopped by an alarm after `ALARM` seconds."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("many.py")), str(ALARM)],
        input=json.dumps(lines),
        capture_output=True,
        text=True,
        env=environ(),
        timeout=ALARM * len(lines) + 120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize(
    "kind", sampled(["fifo", "socket", "device", "directory", "missing"], keep=3)
)
def test_every_command_refuses_at_once(
    kind: str, special_paths: dict[str, Path], tmp_path: Path
) -> None:
    path = special_paths[kind]
    other = tmp_path / "other.sqlite3"
    lines = [
        [a.format(db=path, other=other) for a in args]
        for args in COMMANDS
        # upgrade creates a store there; a missing source of copy is an exit 3 of its own
        if not (kind == "missing" and args[0] in ("upgrade", "copy", "sync"))
    ]
    failures = [
        f"{' '.join(r['argv'][:1])}: exit {r['code']}: {str(r['err']).strip()[:200]}"  # type: ignore[index]
        for r in run_many(lines)
        if r["code"] != 3 or "Traceback" in str(r["err"])
    ]
    assert not failures, "\n".join(failures)
    assert not other.exists()
