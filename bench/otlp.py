"""Benchmark 13: exporting a store as OpenTelemetry traces (`harness_store.otel.export`).

A store of runs of 100 steps, each step with a provider call and a tool call (so 201 spans a
run), exported over OTLP/HTTP protobuf to a minimal local sink (a separate process on
127.0.0.1 that answers 200 to every POST), beside the floor: the SDK's OTLP exporter alone
sending the same number of prebuilt spans (one run's spans, built once, sent again and again)
to the same sink in batches of the same size. Each side runs in its own subprocess, alternated,
and its peak RSS is read there: the export at two store sizes shows whether memory stays flat
as the store grows, and the export of a store holding one run of as many steps whether it
stays flat as a run grows (its spans go out over many requests, its events in pages).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import Config, Table, fmt_bytes, fmt_rate, median, say

STEPS_PER_RUN = 100
SINK = r"""
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def build(path: Path, steps: int) -> Path:
    """A store of `steps` steps in runs of 100, each step with a provider call and a tool call
    (built once per size, kept in the cache)."""
    if path.exists():
        return path
    from harness_store import Store
    from harness_store.records import ProviderCall, StepRecord, Usage

    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with Store.open(partial) as store:
        for first in range(0, steps, STEPS_PER_RUN):
            run = store.start_run(f"benchmark run {first // STEPS_PER_RUN}", "/repo")
            records = [
                StepRecord.new(n, f"edit step {n}", f"ok {n}").with_trace(
                    f"prompt {n}", f'edit_file:{{"path":"src/{n}.rs"}}', 100
                )
                for n in range(1, STEPS_PER_RUN + 1)
            ]
            with store.transaction():
                store.checkpoint_steps(run, records)
                for n in range(1, STEPS_PER_RUN + 1):
                    usage = Usage(prompt_tokens=1000, completion_tokens=100, total_tokens=1100)
                    store.record_provider_call(
                        run, ProviderCall(step=n, attempt=1, provider="anthropic",
                                          model="claude-sonnet-4-5", usage=usage, latency_ms=800,
                                          finish_reason="tool_use"),
                    )  # fmt: skip
            store.finish_run(run, "success")
    partial.rename(path)
    for leftover in path.parent.glob(partial.name + "*"):  # the closed store's side files
        leftover.unlink()
    return path


def build_long(path: Path, steps: int) -> Path:
    """A store of one run of `steps` steps, each with a provider call and a tool call (built
    once per size, kept in the cache)."""
    if path.exists():
        return path
    from harness_store import Store
    from harness_store.records import ProviderCall, StepRecord, Usage

    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    usage = Usage(prompt_tokens=1000, completion_tokens=100, total_tokens=1100)
    with Store.open(partial) as store:
        run = store.start_run("one long benchmark run", "/repo")
        with store.transaction():
            store.checkpoint_steps(run, [
                StepRecord.new(n, f"edit step {n}", f"ok {n}").with_trace(
                    f"prompt {n}", f'edit_file:{{"path":"src/{n}.rs"}}', 100
                )
                for n in range(1, steps + 1)
            ])  # fmt: skip
            for n in range(1, steps + 1):
                store.record_provider_call(
                    run, ProviderCall(step=n, attempt=1, provider="anthropic",
                                      model="claude-sonnet-4-5", usage=usage, latency_ms=800,
                                      finish_reason="tool_use"),
                )  # fmt: skip
        store.finish_run(run, "success")
    partial.rename(path)
    for leftover in path.parent.glob(partial.name + "*"):  # the closed store's side files
        leftover.unlink()
    return path


def child_export(path: str, url: str) -> dict[str, Any]:
    from harness_store import Store
    from harness_store.otel import export

    with Store.open(path, read_only=True) as store:
        started = time.perf_counter()
        report = export(store, endpoint=url)
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "spans": report.spans, "requests": report.requests}


def child_floor(path: str, url: str, spans: int) -> dict[str, Any]:
    """The OTLP exporter alone: one run's spans built beforehand, sent until `spans` went."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from harness_store import Store
    from harness_store.otel.exporter import Exporter
    from harness_store.otel.sender import BATCH
    from harness_store.store.trace_export import RunRows, TraceExport

    with Store.open(path, read_only=True) as store:
        builder = Exporter(store, endpoint=url, headers=None, include_content=False, prices=None,
                           identity=None, project="bench", timeout=10.0).builder  # fmt: skip
        reads = TraceExport(store)
        run = reads.runs(limit=1)[0]
        rows = RunRows(run, run.id, list(reads.steps(run.id)), reads.provider_calls(run.id),
                       reads.tool_attempts(run.id), reads.server_tool_calls(run.id),
                       reads.mcp_events(run.id), reads.event_rows(run.id))  # fmt: skip
        one_run = list(builder.spans(rows, run))
    pool = (one_run * (BATCH // len(one_run) + 2))[: BATCH * 2]
    exporter = OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=10.0)
    sent = 0
    started = time.perf_counter()
    while sent < spans:
        batch = pool[: min(BATCH, spans - sent)]
        assert exporter.export(batch) is SpanExportResult.SUCCESS
        sent += len(batch)
    seconds = time.perf_counter() - started
    exporter.shutdown()  # type: ignore[no-untyped-call]
    return {"seconds": seconds, "spans": sent}


def child(argv: list[str]) -> None:
    kind, *args = argv
    result = (
        child_export(*args) if kind == "export" else child_floor(args[0], args[1], int(args[2]))
    )
    result["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result))


def in_child(*args: str) -> dict[str, Any]:
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "bench.otlp", *args], capture_output=True,
                          text=True, check=True, cwd=repo)  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(cfg: Config) -> list[Table]:
    big, small = cfg.pick((100_000, 10_000), (10_000, 2_000))
    rounds = cfg.pick(3, 1)
    say(f"otlp: building stores of {small:,} and {big:,} steps")
    big_store = build(cfg.cache / f"otlp-{big}.sqlite3", big)
    small_store = build(cfg.cache / f"otlp-{small}.sqlite3", small)
    say(f"otlp: building a store of one run of {big:,} steps")
    long_store = build_long(cfg.cache / f"otlp-one-run-{big}.sqlite3", big)
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        url = f"http://127.0.0.1:{sink.stdout.readline().strip()}"
        exports: list[dict[str, Any]] = []
        floors: list[dict[str, Any]] = []
        for i in range(rounds):
            say(f"otlp: round {i + 1}/{rounds}")
            if i % 2 == 0:  # alternate which side goes first (the first round sets the count)
                exports.append(in_child("export", str(big_store), url))
            floors.append(in_child("floor", str(big_store), url, str(exports[0]["spans"])))
            if i % 2 == 1:
                exports.append(in_child("export", str(big_store), url))
        small_run = in_child("export", str(small_store), url)
        long_run = in_child("export", str(long_store), url)
    finally:
        sink.terminate()
        sink.wait()
    spans = exports[-1]["spans"]
    export_rate = median([e["spans"] / e["seconds"] for e in exports])
    floor_rate = median([f["spans"] / f["seconds"] for f in floors])
    ratios = [f["seconds"] / e["seconds"] for e, f in zip(exports, floors, strict=True)]
    ratio = median(ratios)
    table = Table(
        f"13. OTLP export: {big:,}-step store ({spans:,} spans), {rounds} round(s)",
        ["variant", "spans/s", "vs floor", "peak RSS", "target"],
    )
    table.add("OTLP exporter alone, prebuilt spans (floor)", fmt_rate(floor_rate), "1.00×",
              fmt_bytes(median([f["maxrss"] for f in floors])), "")  # fmt: skip
    table.add("harness_store.otel.export", fmt_rate(export_rate), f"{ratio:.2f}×",
              fmt_bytes(median([e["maxrss"] for e in exports])),
              table.check("export ≥ 0.5× the OTLP exporter alone", ratio >= 0.5))  # fmt: skip
    growth = median([e["maxrss"] for e in exports]) / small_run["maxrss"]
    small_rate = small_run["spans"] / small_run["seconds"]
    table.add(f"export of a {small:,}-step store", fmt_rate(small_rate), "",
              fmt_bytes(small_run["maxrss"]),
              table.check(f"peak RSS flat from {small:,} to {big:,} steps (≤ 1.25×)",
                          growth <= 1.25))  # fmt: skip
    long_growth = long_run["maxrss"] / small_run["maxrss"]
    long_rate = long_run["spans"] / long_run["seconds"]
    table.add(f"export of one run of {big:,} steps", fmt_rate(long_rate), "",
              fmt_bytes(long_run["maxrss"]),
              table.check(f"peak RSS of one {big:,}-step run ≤ 1.25× the {small:,}-step store's",
                          long_growth <= 1.25))  # fmt: skip
    table.notes.append(
        f"peak RSS at {big:,} steps is {growth:.2f}× that at {small:,}, and {long_growth:.2f}× "
        f"for one run of {big:,} steps (sent in {long_run['requests']:,} requests); each "
        "variant runs in its own process against one local sink process that answers 200 to "
        "every request"
    )
    return [table]


if __name__ == "__main__":
    child(sys.argv[1:])
