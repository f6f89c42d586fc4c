"""A real full disk for a test: a tmpfs of a few bytes mounted in the test's directory (needs
root; a machine that refuses the mount skips the test, as it does not apply there), and a
file that fills what is left of one but a given number of bytes."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SmallDisk = Callable[[int], Path]
"""Mounts a new tmpfs of that many bytes and returns its directory."""


@contextmanager
def small_disks(tmp_path: Path) -> Iterator[SmallDisk]:
    """Mount tmpfs file systems in `tmp_path` on demand; unmount them all at the end."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mounts: list[Path] = []

    def make(size: int) -> Path:
        where = tmp_path / f"disk{len(mounts)}"
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounts.append(where)
        return where

    try:
        yield make
    finally:
        for where in mounts:
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file on `disk` taking all its free space but `leave` bytes (tmpfs counts whole
    pages, so what is left is `leave` rounded down to a page)."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    filler = disk / "filler"
    with filler.open("wb") as handle:
        handle.write(b"\0" * max(0, free - leave))
    return filler
