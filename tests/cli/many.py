"""Run several `harness-store` command lines in one child process (one interpreter start for
all of them), each with an alarm: `python -m cli.many SECONDS` reads a JSON list of argument
lists on stdin and prints one JSON result per line: exit code, stderr, or `blocked`."""

from __future__ import annotations

import io
import json
import signal
import sys
from contextlib import redirect_stderr, redirect_stdout
from types import FrameType

from harness_store.cli import main


class Blocked(BaseException):
    """The alarm rang: the command was still running."""


def ring(signum: int, frame: FrameType | None) -> None:
    raise Blocked


def run(argv: list[str], seconds: int) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    signal.alarm(seconds)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Blocked:
        code = "blocked"
    finally:
        signal.alarm(0)
    return {"argv": argv, "code": code, "err": err.getvalue()}


if __name__ == "__main__":
    seconds = int(sys.argv[1])
    signal.signal(signal.SIGALRM, ring)
    for argv in json.load(sys.stdin):
        sys.stdout.write(json.dumps(run(argv, seconds)) + "\n")
        sys.stdout.flush()
