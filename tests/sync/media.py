"""Read-only media for the tests: a read-only bind mount of a directory (root cannot be kept
from writing by file modes, so the medium itself must refuse)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only_medium(directory: Path, mount_point: Path) -> Iterator[Path]:
    """`directory` seen through a read-only bind mount at `mount_point` (skips the test where
    mounting is not allowed)."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command to make a read-only medium")
    mount_point.mkdir()
    bind = subprocess.run(
        ["mount", "--bind", str(directory), str(mount_point)], capture_output=True, text=True
    )
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount a read-only medium here: {bind.stderr.strip()}")
    try:
        subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(mount_point)], check=True, capture_output=True
        )
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True, capture_output=True)
