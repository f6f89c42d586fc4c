"""`export otlp` against a receiver that pushes back (429, 502, 503, 504), as Phoenix does while
its queue is full: the export waits, as `Retry-After` asks or longer each time, for as long as
`--max-wait` allows, apart from `--timeout` (which bounds each request), and then every span
has arrived exactly once; a receiver that never stops pushing back is given up on with one
line. The loopback sink counts every copy of a span and keeps when each request arrived."""

from __future__ import annotations

import threading
import time
from email.utils import formatdate
from pathlib import Path

import pytest
from support.clirun import run_in_process

from harness_store import Store
from harness_store.cli.export.otlp import MAX_WAIT_DEFAULT
from harness_store.otel import ExportReport, follow
from harness_store.otel.transport import MAX_RETRY_AFTER, MAX_WAIT, retry_after_seconds

from .sink import Sink
from .trees import write_run

SPANS = 601
"""What `long_store` exports: 300 chat and 300 tool spans and the run's, in two batches."""


@pytest.fixture
def long_store(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("many calls", "/repo")
        write_run(store, run, 300, "m")
        store.finish_run(run, "success")
    return path


@pytest.fixture
def sink() -> Sink:
    return Sink.start()


@pytest.mark.parametrize("retry_after", [None, "1"])
def test_pushed_back_past_the_timeout_every_span_arrives_once(
    long_store: Path, sink: Sink, retry_after: str | None
) -> None:
    """Pushed back for longer than the default `--timeout` (10 s): the export waits it out."""
    sink.retry_after = retry_after
    sink.busy_for(11)
    try:
        done = run_in_process("export", "otlp", str(long_store), "--endpoint", sink.url)
    finally:
        sink.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"sent {SPANS} spans of 1 runs"), done.stdout
    assert sink.pushed_back >= 2
    assert sink.total() == SPANS and set(sink.counts.values()) == {1}


def test_each_batch_pushed_back_is_counted_once(long_store: Path, sink: Sink) -> None:
    """Both batches are pushed back twice before they are taken: the report counts each once,
    and the same span ids went out each time."""
    sink.retry_after = "0"
    sink.busy = lambda: len(sink.attempts) % 3 != 0
    try:
        done = run_in_process("export", "otlp", str(long_store), "--endpoint", sink.url)
    finally:
        sink.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"sent {SPANS} spans of 1 runs"), done.stdout
    assert len(sink.attempts) == 6 and sink.pushed_back == 4
    assert sink.total() == SPANS and set(sink.counts.values()) == {1}


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_retry_after_is_honoured(tmp_path: Path, sink: Sink, form: str) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("one call", "/repo")
        write_run(store, run, 1, "m")
        store.finish_run(run, "success")
    # two seconds, or a date two to three seconds after the answer (a date has whole seconds),
    # written as the sink answers: a date written before the command started could be past
    # by the time it asks, under load (a past date asks for no pause)
    sink.retry_after = (
        "2" if form == "seconds" else lambda: formatdate(time.time() + 3, usegmt=True)
    )
    sink.busy = lambda: len(sink.attempts) == 1
    try:
        done = run_in_process("export", "otlp", str(path), "--endpoint", sink.url)
    finally:
        sink.stop()
    assert done.returncode == 0, done.stderr
    (pause,) = sink.pauses()
    assert 1.5 <= pause <= 30, pause  # the exponential pause alone would be under a second
    assert sink.total() == 3


def test_without_retry_after_the_pauses_grow(tmp_path: Path, sink: Sink) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("one call", "/repo")
        store.finish_run(run, "success")
    sink.busy = lambda: len(sink.attempts) <= 4
    try:
        done = run_in_process("export", "otlp", str(path), "--endpoint", sink.url)
    finally:
        sink.stop()
    assert done.returncode == 0, done.stderr
    pauses = sink.pauses()
    assert len(pauses) == 4 and pauses[-1] > pauses[0] > 0.1, pauses


@pytest.mark.parametrize("retry_after", [None, "3600"])
def test_a_receiver_pushing_back_for_ever_is_given_up_after_max_wait(
    tmp_path: Path, sink: Sink, retry_after: str | None
) -> None:
    """Given up once the next pause would end past `--max-wait`: a `Retry-After` beyond it at
    once, without another try."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("one call", "/repo")
        write_run(store, run, 1, "m")
        store.finish_run(run, "success")
    sink.retry_after = retry_after
    sink.busy_for(None)
    try:
        done = run_in_process(
            "export", "otlp", str(path), "--endpoint", sink.url, "--max-wait", "3"
        )
    finally:
        sink.stop()
    assert done.returncode == 1, done.stdout
    assert done.stderr == (
        f"harness-store: error: the OTLP receiver at {sink.url}/v1/traces kept answering HTTP "
        "503 Service Unavailable (try again later) past the 3 s the export waits for it: "
        "batch 1 (spans 1-3) was not delivered; no earlier batch\n"
    )
    assert sink.total() == 0
    if retry_after is None:
        assert len(sink.attempts) > 1
    else:
        assert len(sink.attempts) == 1


def test_max_wait_0_gives_up_at_the_first_push_back(tmp_path: Path, sink: Sink) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        store.finish_run(store.start_run("no steps", "/repo"), "success")
    sink.retry_after = "0"  # even when the receiver asks to be tried again at once
    sink.busy_for(None)
    try:
        done = run_in_process(
            "export", "otlp", str(path), "--endpoint", sink.url, "--max-wait", "0"
        )
    finally:
        sink.stop()
    assert done.returncode == 1, done.stdout
    assert "past the 0 s the export waits for it: batch 1 (spans 1-1)" in done.stderr
    assert len(sink.attempts) == 1


@pytest.mark.parametrize("value", ["-1", "nan", "soon"])
def test_max_wait_takes_seconds_not_below_zero(tmp_path: Path, value: str) -> None:
    done = run_in_process(
        "export", "otlp", str(tmp_path / "none.sqlite3"), "--endpoint", "http://127.0.0.1:9",
        "--max-wait", value,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert "--max-wait" in done.stderr and "Traceback" not in done.stderr


def test_retry_after_values() -> None:
    now = 1_000_000_000.0
    assert retry_after_seconds("7", now) == 7
    assert retry_after_seconds(" 0 ", now) == 0
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now) == 30
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now) == 0
    assert retry_after_seconds("99999", now) == MAX_RETRY_AFTER
    for unreadable in ("", "-5", "1.5", "soon", "Mon, 99 Foo 2026"):
        assert retry_after_seconds(unreadable, now) is None, unreadable


def test_a_follow_under_backpressure_ships_each_run_once(tmp_path: Path, sink: Sink) -> None:
    """Each of a follow's requests pushed back once, asked to wait longer than the timeout:
    each run arrives once, and the report counts each once."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        runs = []
        for n in range(3):
            run = store.start_run(f"run {n}", "/repo")
            write_run(store, run, 1, "m")
            store.finish_run(run, "success")
            runs.append(run)
    sink.retry_after = "2"
    sink.busy = lambda: len(sink.attempts) % 2 == 1
    stop = threading.Event()

    def sent(report: ExportReport) -> None:
        if report.runs == len(runs):
            stop.set()

    try:
        with Store.open(path, read_only=True) as reader:
            report = follow(reader, endpoint=sink.url, after=0, timeout=1, interval=0.05,
                            stop=stop, on_send=sent)  # fmt: skip
    finally:
        sink.stop()
    assert report.runs == len(runs) and report.spans == 3 * len(runs) == sink.total()
    assert sink.arrivals == runs and set(sink.counts.values()) == {1}
    assert sink.pushed_back == len(runs)
    assert all(pause >= 1.5 for pause in sink.pauses()[::2]), sink.pauses()


def test_the_command_s_default_wait_is_the_library_s() -> None:
    assert MAX_WAIT_DEFAULT == MAX_WAIT == 300
