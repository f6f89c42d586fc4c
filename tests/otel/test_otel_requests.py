"""A long run goes out in requests a receiver takes: no request above the size asked for
(`max_request_bytes`, `--max-request-bytes`) nor above `BATCH` spans, one trace across them with
the same ids, every span whole and under the right parent; and the command's memory stays flat
as the run grows (the run's steps are streamed, never held whole)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from support.clirun import peak_rss_kib, run_in_process

from harness_store import StepRecord, Store
from harness_store.cli.export.otlp import MAX_REQUEST_BYTES_DEFAULT
from harness_store.otel import export
from harness_store.otel.sender import BATCH, MAX_REQUEST_BYTES

from .big_run import long_run
from .sink import Sink
from .trees import call

STEPS = 2_500
"""Steps of the long run: each a chat and a tool span and a step event, so 5,000 spans and
2,500 events, more than `BATCH` spans and several times the small limit below."""

LIMIT = 64 * 1024
"""A request size far below the default, so a run of a few thousand steps needs many."""


def write_long_run(store: Store, steps: int) -> int:
    run = store.start_run("a long run", "/repo")
    with store.transaction():
        store.checkpoint_steps(
            run,
            [
                StepRecord.new(n, f"edit step {n}", f"ok {n}").with_trace(
                    f"prompt {n}", f'edit_file:{{"path":"src/{n}.rs"}}', 10
                )
                for n in range(1, steps + 1)
            ],
        )
        for n in range(1, steps + 1):
            store.record_provider_call(run, call(n, "m", 100, 10))
    store.finish_run(run, "success")
    return run


@pytest.mark.slow_on("postgresql")
def test_a_long_run_goes_out_in_bounded_requests_as_one_trace(store_target: str) -> None:
    with Store.open(store_target) as store:
        run = write_long_run(store, STEPS)
    sink = Sink.start()
    try:
        with Store.open(store_target, read_only=True) as reader:
            report = export(reader, endpoint=sink.url, max_request_bytes=LIMIT)
    finally:
        sink.stop()
    assert sink.requests == report.requests > 1
    assert all(size <= LIMIT and spans <= BATCH for size, spans in sink.bodies), sink.bodies
    assert set(sink.counts.values()) == {1}, "a span was sent twice"
    spans = sink.spans
    assert len(spans) == report.spans
    assert len({s["trace_id"] for s in spans.values()}) == 1
    (run_span,) = [s for s in spans.values() if s.get("gen_ai.operation.name") == "invoke_agent"]
    assert run_span["harness.run.id"] == run and run_span["parent"] == b""
    run_id = next(i for i, s in spans.items() if s is run_span)
    kinds = Counter(s.get("gen_ai.operation.name", s["name"]) for s in spans.values())
    assert kinds["chat"] == kinds["execute_tool"] == STEPS
    assert all(s["parent"] == run_id for i, s in spans.items() if i != run_id)
    steps = sorted(n for s in spans.values() for n in s["step_events"])
    assert steps == list(range(1, STEPS + 1)), "a step's event is missing or doubled"


def test_the_command_takes_the_limit_and_refuses_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    long_run(path, 1_200)
    sink = Sink.start()
    try:
        done = run_in_process("export", "otlp", str(path), "--endpoint", sink.url,
                              "--max-request-bytes", str(LIMIT))  # fmt: skip
        bad = run_in_process("export", "otlp", str(path), "--endpoint", sink.url,
                             "--max-request-bytes", "100")  # fmt: skip
    finally:
        sink.stop()
    assert done.returncode == 0, done.stderr
    assert max(size for size, _ in sink.bodies) <= LIMIT
    steps = sorted(n for s in sink.spans.values() for n in s["step_events"])
    assert steps == list(range(1, 1_200 + 1))
    assert bad.returncode == 2, bad.stderr
    assert "--max-request-bytes" in bad.stderr and "Traceback" not in bad.stderr


def test_the_default_limit_is_one_every_receiver_takes() -> None:
    """4 MiB: below the OpenTelemetry Collector's OTLP/HTTP default (20 MiB) and the gRPC
    default message size (4 MiB) a collector forwarding the spans meets next."""
    assert MAX_REQUEST_BYTES == MAX_REQUEST_BYTES_DEFAULT == 4 * 1024 * 1024


def _peak_mib(path: Path, sink: Sink) -> float:
    return peak_rss_kib("export", "otlp", path, "--endpoint", sink.url) / 1024


@pytest.mark.parametrize(
    "big", [pytest.param(20_000), pytest.param(100_000, marks=pytest.mark.slow)]
)
def test_memory_stays_flat_as_a_run_grows(tmp_path: Path, big: int) -> None:
    """The command's peak RSS exporting one run of `big` steps is within a few MiB of its
    peak for a run of 1,000: 20,000 steps already held some 60 MiB more when the run's events
    were kept whole (100,000: 250 MiB more)."""
    small_path, big_path = tmp_path / "small.sqlite3", tmp_path / "big.sqlite3"
    long_run(small_path, 1_000)
    long_run(big_path, big)
    sink = Sink.start()
    try:
        small, large = _peak_mib(small_path, sink), _peak_mib(big_path, sink)
    finally:
        sink.stop()
    assert large <= small + 16, f"{small:.1f} MiB for 1,000 steps, {large:.1f} MiB for {big:,}"
    assert sink.total() == 2 * (1_000 + big) + 2 + (big - 1) // 1000
