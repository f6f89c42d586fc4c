"""The peaks of what one run of the command allocated, as its own process runs it: Python's
heap (`tracemalloc`) and pyarrow's memory pool. Unlike the peak resident memory, they do not
move with what the allocators keep after freeing, so two runs of one command over one store
agree to a few KiB, and a Python object held per run shows at any store size."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.clirun import environ

PROBE = (
    "import json, runpy, sys, tracemalloc\n"
    "tracemalloc.start(1)\n"
    "sys.argv = ['harness-store', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('harness_store.cli', run_name='__main__')\n"
    "except SystemExit as exc:\n"
    "    assert not exc.code, exc.code\n"
    "import pyarrow\n"
    "print(json.dumps([tracemalloc.get_traced_memory()[1],\n"
    "                  pyarrow.default_memory_pool().max_memory()]), file=sys.stderr)\n"
)
"""The command run as `python -m harness_store.cli` runs it (its own process: pandas spared,
the collector frozen), traced from before its imports; then the two peaks on stderr."""


@dataclass(frozen=True)
class HeapPeaks:
    """Peaks of one run of the command, KiB."""

    python: int
    arrow: int


def heap_peaks(*args: str | Path) -> HeapPeaks:
    """The peaks of Python's heap and pyarrow's pool in one run of `harness-store ARGS…`."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environ(),
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    python, arrow = json.loads(done.stderr.strip().splitlines()[-1])
    return HeapPeaks(python // 1024, arrow // 1024)
