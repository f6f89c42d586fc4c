"""Parent-side helpers for the multi-process tests: start a worker script, read what it
acknowledges, kill it with SIGKILL at a chosen moment (`Worker`); or start several, release them
together and collect what each printed (`run_together`).

Each worker writes one line per acknowledged action to stdout and flushes it. A reader thread
collects complete lines (a line cut short by a kill has no newline and is not counted), so the
parent can wait for a line with a timeout, and read every acknowledgement once the process is
dead.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

WORKERS = Path(__file__).resolve().parents[1] / "workers"
REPO = WORKERS.parents[1]
ALEMBIC_INI = REPO / "alembic.ini"


def default_signals() -> None:
    """A child's `preexec_fn`: Ctrl-C and hangups delivered as at a terminal. A shell running
    the suite as a background job, or under `nohup`, starts its children with SIGINT or SIGHUP
    ignored, which the command (rightly) keeps."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def alembic_argv(path: Path | str, *extra: str) -> list[str]:
    """The real `alembic -c alembic.ini -x db=PATH … upgrade head` command line."""
    alembic = Path(sys.executable).with_name("alembic")
    return [str(alembic), "-c", str(ALEMBIC_INI), "-x", f"db={path}", *extra, "upgrade", "head"]


def alembic_fails(argv: Sequence[str], message: str) -> None:
    """Alembic's command line `argv` failed with `message` on its one `FAILED:` line, as it
    tells its own errors (exit status 255), with no traceback."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 255, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    assert f"FAILED: {' '.join(message.split())}" in done.stdout.splitlines(), said[-3000:]


class Worker:
    """A running worker script (or any command) whose stdout lines are collected as they come."""

    def __init__(self, argv: list[str], *, cwd: Path | None = None) -> None:
        self.argv = argv
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=default_signals,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._err = bytearray()
        self._tail = b""
        self._out_thread = threading.Thread(target=self._pump_out, daemon=True)
        self._err_thread = threading.Thread(target=self._pump_err, daemon=True)
        self._out_thread.start()
        self._err_thread.start()

    @classmethod
    def script(cls, name: str, *args: object) -> Worker:
        """Run `tests/workers/<name>` with this interpreter."""
        return cls([sys.executable, str(WORKERS / name), *map(str, args)])

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buffer = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", "replace")
                self.lines.append(line)
                self._queue.put(line)
        self._tail = buffer
        self._queue.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self._err += chunk

    def wait_line(self, prefix: str, timeout: float = 30.0) -> str:
        """Block until a line starting with `prefix` arrives; fail on exit or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise AssertionError(f"no {prefix!r} line from {self.argv} in {timeout}s")
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait()
                raise AssertionError(
                    f"{self.argv} exited ({self.proc.returncode}) before {prefix!r}:\n"
                    + self.stderr
                )
            if line.startswith(prefix):
                return line

    def kill(self) -> int:
        """SIGKILL the process (if it still runs), reap it, drain its output; the exit code."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        return self.finish()

    def finish(self, timeout: float | None = None) -> int:
        """Wait for the process to end and for its output to be read; the exit code."""
        rc = self.proc.wait(timeout=timeout)
        self._out_thread.join(10)
        self._err_thread.join(10)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc

    @property
    def stderr(self) -> str:
        return self._err.decode("utf-8", "replace")

    @property
    def killed(self) -> bool:
        """Whether the process died of SIGKILL (rather than finishing first)."""
        return self.proc.returncode == -signal.SIGKILL

    def numbers(self) -> list[int]:
        """Every complete stdout line that is a plain integer, in order."""
        return [int(line) for line in self.lines if line.strip().lstrip("-").isdigit()]


def wait_for_file(path: Path, timeout: float = 30.0, poll: float = 0.001) -> bool:
    """Poll until `path` exists; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(poll)
    return False


def worker_argv(name: str, *args: object) -> list[str]:
    """The command line that runs `tests/workers/<name>` with this interpreter."""
    return [sys.executable, str(WORKERS / name), *map(str, args)]


def run_together(argvs: Sequence[Sequence[str]], *, timeout: float = 300) -> list[str]:
    """Start one process per argv, wait until every one has printed `ready`, then write `go` to
    each, so that they start their work at once; return each one's whole stdout, in argv order,
    after all of them exited 0 (a process that fails, or never gets ready, fails the test, and
    every one still running is killed).

    Each process prints `ready` once it is set up (its store open), waits for a line on stdin,
    then does its work.
    """
    procs = [
        subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line == "ready", f"{proc.args} printed {line!r}, not ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err
            outputs.append(out)
        return outputs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def child_python(
    code: str, target: str, *args: str, stdin: int | None = None
) -> subprocess.Popen[str]:
    """`python -c code target args…` with the checkout importable, its output piped as text
    (and its input, given `stdin=subprocess.PIPE`)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", code, target, *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
