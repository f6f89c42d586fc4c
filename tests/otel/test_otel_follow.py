"""`export otlp --follow` beside a real writer process, on both backends, counted at a loopback
receiver that keeps every copy: each run that finishes during the follow is shipped exactly
once, whether its writer recorded `run_events` (as io-harness's loop does) or none (as the
Store's own `start_run`/`finish_run`), and on PostgreSQL a session terminated in the middle of a
look does not end the follow."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest
from support.clirun import COMMAND as CLI
from support.pg_databases import terminate_inside_a_read
from support.processes import Worker

from harness_store import StepRecord, Store
from harness_store.otel import ExportReport, export, follow

from .sink import Sink
from .trees import call, write_run

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


def test_a_run_finished_before_another_started_is_shipped_before_it(store_target: str) -> None:
    """Runs watched since the follow began that finish before newer runs start are shipped
    ahead of those, even when one look finds them all: so a reader that stops once the newest
    run has arrived (as a test waiting for its sentinel, or an operator's Ctrl-C) has them."""
    with Store.open(store_target) as store:
        left = [store.start_run(f"running when the follow starts {n}", "/repo") for n in (1, 2)]
        for run in left:
            write_run(store, run, 1, "m")
        after = store.last_run() or 0
        for run in left:  # all before the follow's first look
            store.finish_run(run, "success")
        newer = []
        for n in range(2):
            run = store.start_run(f"started after {n}", "/repo")
            write_run(store, run, 1, "m")
            store.finish_run(run, "success")
            newer.append(run)
    sink, stop = Sink.start(), threading.Event()

    def sent(report: ExportReport) -> None:
        if report.runs == len(left) + len(newer):
            stop.set()

    try:
        with Store.open(store_target, read_only=True) as reader:
            report = follow(reader, endpoint=sink.url, after=after, running=left,
                            interval=0.05, stop=stop, on_send=sent)  # fmt: skip
    finally:
        sink.stop()
    assert report.runs == len(left) + len(newer)
    assert sink.arrivals == [*left, *newer]


@pytest.mark.parametrize("store_target", ["postgresql"], indirect=True)
def test_follow_outlives_a_session_terminated_mid_look(store_target: str) -> None:
    """A look at the store waiting on the server when its session is terminated is read
    again on a new connection: the follow goes on and ships the run finished after. The look
    is held on a table lock so that the termination falls inside it."""
    with Store.open(store_target) as store:
        first = store.start_run("finished first", "/repo")
        write_run(store, first, 1, "m")
        store.finish_run(first, "success")
    sink, stop = Sink.start(), threading.Event()
    errors: list[BaseException] = []

    def ship() -> None:
        try:
            with Store.open(store_target, read_only=True) as reader:
                follow(reader, endpoint=sink.url, after=0, interval=0.05, stop=stop)
        except BaseException as exc:
            errors.append(exc)

    follower = threading.Thread(target=ship)
    follower.start()
    try:
        assert sink.wait_for(lambda: first in sink.run_ids() or bool(errors), timeout=60)
        terminate_inside_a_read(store_target, "runs")
        with Store.open(store_target) as store:
            second = store.start_run("finished after", "/repo")
            write_run(store, second, 1, "m")
            store.finish_run(second, "success")
        assert sink.wait_for(lambda: second in sink.run_ids() or bool(errors), timeout=60)
    finally:
        stop.set()
        follower.join(60)
        sink.stop()
    assert errors == []
    assert sink.arrivals == [first, second]


def test_a_paused_run_is_shipped_when_it_finishes_with_its_later_steps(
    store_target: str,
) -> None:
    """A run paused for an approval is not finished: neither the export that starts a follow
    nor a look of the follow ships it as it stands; once it resumes and finishes, it is
    shipped whole, its steps after the pause included. One run is paused before the export,
    one while the follow watches it (a run finished after that pause, and shipped, shows the
    follow has looked at it paused); a sentinel finished last ends the wait."""
    with Store.open(store_target) as store:
        early = store.start_run("paused before the export", "/repo")
        write_run(store, early, 1, "m")
        store.finish_run(early, "awaiting_approval")
        late = store.start_run("paused while followed", "/repo")
        write_run(store, late, 1, "m")
    sink, stop = Sink.start(), threading.Event()
    errors: list[BaseException] = []

    def ship() -> None:
        try:
            with Store.open(store_target, read_only=True) as reader:
                first = export(reader, endpoint=sink.url, finished_only=True)
                follow(reader, endpoint=sink.url, after=first.last_run_id,
                       running=first.running, interval=0.05, stop=stop)  # fmt: skip
        except BaseException as exc:
            errors.append(exc)

    follower = threading.Thread(target=ship)
    follower.start()
    try:
        with Store.open(store_target) as store:
            store.finish_run(late, "awaiting_approval")
            marker = store.start_run("finished after the pause", "/repo")
            store.finish_run(marker, "success")
            assert sink.wait_for(lambda: marker in sink.run_ids() or bool(errors), timeout=60)
            for run in (early, late):  # approved: resumed, one more step, finished
                store.set_status(run, "running")
                store.checkpoint_step(run, StepRecord.new(2, "write", "written"))
                store.record_provider_call(run, call(2, "m", 100, 10))
                store.finish_run(run, "success")
            sentinel = store.start_run("sentinel", "/repo")
            store.finish_run(sentinel, "success")
        assert sink.wait_for(lambda: sentinel in sink.run_ids() or bool(errors), timeout=60)
    finally:
        stop.set()
        follower.join(60)
        sink.stop()
    assert errors == []
    with sink.lock:
        spans = list(sink.spans.values())
    for run in (early, late):
        agent = [s for s in spans if s.get("harness.run.id") == run]
        assert [s["harness.run.status"] for s in agent] == ["completed"]
        chats = sorted(s["harness.provider_call.step"] for s in spans
                       if s.get("gen_ai.operation.name") == "chat"
                       and s["trace_id"] == agent[0]["trace_id"])  # fmt: skip
        assert chats == [1, 2], f"run {run}: chat spans of steps {chats}"
    assert set(sink.counts.values()) == {1}, "a span was sent twice"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_ends_the_follow_cleanly_with_its_summary(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGTERM (a service manager, `docker stop`) and SIGHUP (a closed terminal) stop the
    follow as Ctrl-C does: the run it is shipping goes out, then a last line counts what the
    follow sent, and the exit code is 0, nothing on stderr."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("finished before the follow", "/repo")
        write_run(store, run, 1, "m")
        store.finish_run(run, "success")
    sink = Sink.start()
    follower = Worker([*CLI, "export", "otlp", str(path), "--endpoint", sink.url, "--follow"])
    try:
        first = follower.wait_line("", timeout=180)
        assert first.startswith("sent 3 spans of 1 runs"), first
        with Store.open(path) as store:
            run = store.start_run("finished during the follow", "/repo")
            write_run(store, run, 1, "m")
            store.finish_run(run, "success")
        shipped = follower.wait_line("", timeout=180)
        follower.proc.send_signal(stop)
        code = follower.finish(timeout=60)
    finally:
        if follower.proc.poll() is None:
            follower.kill()
        sink.stop()
    assert code == 0, (code, follower.stderr)
    assert follower.stderr == ""
    assert follower.lines == [first, shipped, shipped], follower.lines
    assert shipped.startswith("sent 3 spans of 1 runs")
