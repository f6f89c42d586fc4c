"""Running `harness-store` for tests: in its own process as a user runs it, piped (`run_cli`),
on a pseudo-terminal (`on_terminal`) and measured (`peak_rss_kib`); and in this process
(`run_in_process`), where a test needs no process of its own and a module runs many."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from harness_store import Store
from harness_store.cli import main
from harness_store.records import StepRecord

from .new_stores import new_sqlite_store

COLOUR_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "COLUMNS")
COMMAND = [sys.executable, "-m", "harness_store.cli"]


def environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment without anything that changes how output is drawn."""
    env = {k: v for k, v in os.environ.items() if k not in COLOUR_ENV}
    env.pop("HARNESS_STORE_DEBUG", None)
    env.update(extra or {})
    return env


def run_cli(
    *args: object,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`harness-store ARGS…` in its own process with its output piped: the exit code, stdout
    and stderr. The environment is `environ(env)`; `stdin` is what it reads (none: an empty
    input that is not a terminal)."""
    feed: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run(
        [*COMMAND, *map(str, args)],
        capture_output=True,
        text=True,
        env=environ(env),
        timeout=timeout,
        **feed,
    )


def run_in_process(
    *args: object, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`harness-store ARGS…` in this process, as `main` runs it: with the environment a
    `run_cli` child gets (`environ(env)`, so errors are one line and nothing changes how
    output is drawn), restored afterwards. For tests of what the command says and does; a
    test of the process itself (signals, exit at a closed pipe, start-up, what reaches a
    terminal) runs it with `run_cli`. The result is shaped as `run_cli`'s."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    saved = dict(os.environ)
    child = environ(env)  # read before clearing: the child's is the test's, less the colours
    os.environ.clear()
    os.environ.update(child)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(
        [*COMMAND, *map(str, args)], code, out.getvalue(), err.getvalue()
    )


def on_terminal(*args: str | Path, columns: int = 80) -> tuple[int, str]:
    """Run the command with stdout and stderr on a pseudo-terminal `columns` wide; its exit
    code and everything it wrote (CRLF as LF)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        [*COMMAND, *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=environ({"COLUMNS": str(columns), "TERM": "xterm"}),
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=300)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def peak_rss_kib(*args: str | Path) -> int:
    """The peak resident memory (KiB) of one run of the command, output thrown away: measured
    by a small parent process through `RUSAGE_CHILDREN`, so only this run counts."""
    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "assert done.returncode == 0, done.returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *COMMAND, *map(str, args)],
        capture_output=True,
        text=True,
        env=environ(),
        timeout=600,
        check=True,
    )
    return int(done.stdout.strip())


def step_store(path: Path, steps: int, *, runs: int = 1) -> Path:
    """A store with `runs` runs, the first of them `steps` steps long (tokens 1 each); a new
    store starts as a copy of the process's new one (`new_sqlite_store`)."""
    with Store.open(new_sqlite_store(path)) as store:
        first = store.start_run("the long run", "task.md")
        for start in range(1, steps + 1, 50_000):
            store.checkpoint_steps(
                first,
                (
                    StepRecord(i, f"decision {i}", f"result {i}", tool_call="t:{}", tokens=1)
                    for i in range(start, min(start + 50_000, steps + 1))
                ),
            )
        for n in range(1, runs):
            store.start_run(f"goal {n}", "task.md")
    return path
