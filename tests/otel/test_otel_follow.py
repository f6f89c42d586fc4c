"""`export otlp --follow` beside a real writer process, on both backends, counted at a loopback
receiver that keeps every copy: each run that finishes during the follow is shipped exactly
once, whether its writer recorded `run_events` (as io-harness's loop does) or none (as the
Store's own `start_run`/`finish_run`)."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter

import pytest
from support.processes import Worker

from harness_store import Store

from .sink import Sink
from .test_otel_cli import CLI
from .trees import write_run

RUNS = 40
"""Runs the writer finishes during the follow: half with events and half without, a third of
them children, over many of the follow's polls; enough that each kind is seen finishing while
the follow runs, and few enough to stay quick on a loaded machine."""


@pytest.mark.slow_on("postgresql")
def test_follow_ships_every_finished_run_exactly_once(store_target: str) -> None:
    with Store.open(store_target) as store:
        before = store.start_run("finished before the follow", "/repo")
        write_run(store, before, 1, "m")
        store.finish_run(before, "success")
        left = [store.start_run(f"running when the follow starts {n}", "/repo") for n in (1, 2)]
        for run in left:
            write_run(store, run, 1, "m")
    sink = Sink.start()
    follower = Worker([*CLI, "export", "otlp", store_target, "--endpoint", sink.url, "--follow"])
    try:
        first = follower.wait_line("", timeout=180)
        assert first.startswith("sent 3 spans of 1 runs"), first
        writer = Worker.script("otel_run_writer.py", store_target, RUNS, *left)
        sentinel = int(writer.wait_line("sentinel", timeout=300).split()[1])
        assert writer.finish(timeout=60) == 0, writer.stderr
        finished = [int(line.split()[1]) for line in writer.lines if line.startswith("finished")]
        assert len(finished) == RUNS + len(left)
        arrived = sink.wait_for(lambda: sentinel in sink.run_ids(), timeout=180)
        assert arrived, "the sentinel run never arrived"
    finally:
        follower.proc.send_signal(signal.SIGINT)
        try:
            code = follower.finish(timeout=60)
        except subprocess.TimeoutExpired:
            code = follower.kill()
        sink.stop()
    assert code == 0, follower.stderr
    shipped = sink.run_ids()
    assert shipped == Counter({run: 1 for run in [before, *finished, sentinel]})
    assert set(sink.counts.values()) == {1}, "a span was sent twice"
    # each run: its own span, a chat span and a tool span; the sentinel: its own span
    assert sink.total() == 3 * (1 + len(finished)) + 1
