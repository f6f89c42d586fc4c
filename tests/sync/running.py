"""Helpers of the sync tests in this directory: the command run as a user runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.clirun import COMMAND, environ


def run_cli(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`harness-store ARGS…` in its own process; its exit code and output."""
    return subprocess.run(
        [*COMMAND, *map(str, args)],
        capture_output=True,
        text=True,
        env=environ(),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
