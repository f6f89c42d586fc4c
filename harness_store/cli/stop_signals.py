"""The signals that end a command which keeps running until told to stop (`sync --follow`,
`export otlp --follow`): Ctrl-C, SIGTERM (a service manager, `docker stop`) and SIGHUP (a
closed terminal) all ask it to stop, so it finishes what is in flight, says its summary and
exits 0, whichever one came."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
"""The signals that stop a following command after the work in flight (exit code 0)."""


@contextmanager
def stopped_by_signals(stop: threading.Event) -> Iterator[threading.Event]:
    """While the block runs, each of `STOP_SIGNALS` sets `stop` instead of ending the process;
    a signal the process was started ignoring (`nohup`, a background job) stays ignored. The
    handlers are put back as they were after the block. Yields `stop`."""

    def stopping(signum: int, frame: object) -> None:
        stop.set()

    previous = {
        sig: signal.signal(sig, stopping)
        for sig in (getattr(signal, name) for name in STOP_SIGNALS)
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
