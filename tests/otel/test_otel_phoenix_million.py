"""A long run exported to a real Arize Phoenix by `harness-store export otlp` in its own process:
more spans than Phoenix queues (20,000 by default: past it Phoenix answers 503 until it has
written what it holds, and the command waits and sends again), with the command's default
options (`--timeout` bounds each request, `--max-wait` each batch's waiting), in requests of
the default size, one trace, every span once; the command's memory flat all the while.

The size is the largest Phoenix writes in a sane time on a shared two-CPU machine: it stored
some 30–60 spans a second there, so a run of 1,000,000 steps (2,001,000 spans) would take it
ten hours or more; the command's memory at 1,000,000 steps is measured against a receiver that
keeps nothing (`bench`, the OTLP benchmark), and stays flat in `test_otel_requests.py`.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from support.clirun import peak_rss_kib

from harness_store.otel.sender import BATCH

from .big_run import long_run
from .conftest import Phoenix

STEPS = 12_000
"""Steps of the run: 24,013 spans, more than Phoenix queues, in 47 requests."""

WRITTEN_WITHIN = 3_600.0
"""Seconds Phoenix may take to write the spans it accepted (it writes them behind its answers)."""


def stored(phoenix: Phoenix, project: str) -> int:
    """How many spans Phoenix has written for `project`, read from its own database."""
    database = phoenix.log.parent / "phoenix.db"
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM spans JOIN traces ON traces.id = spans.trace_rowid "
            "JOIN projects ON projects.id = traces.project_rowid WHERE projects.name = ?",
            (project,),
        ).fetchone()
    return int(count)


@pytest.mark.slow
def test_a_run_past_phoenixs_queue_reaches_it_whole_with_flat_memory(
    tmp_path: Path, phoenix: Phoenix, project: str
) -> None:
    path = tmp_path / "long.sqlite3"
    long_run(path, STEPS)
    spans = 2 * STEPS + 1 + (STEPS - 1) // 1000  # a chat and a tool span a step, event pages
    assert spans > 20_000 and spans > 40 * BATCH
    peak = peak_rss_kib("export", "otlp", path, "--endpoint", phoenix.url, "--project", project)
    assert peak <= 200 * 1024, f"peak {peak / 1024:.0f} MiB"
    deadline = time.monotonic() + WRITTEN_WITHIN
    while stored(phoenix, project) < spans and time.monotonic() < deadline:
        time.sleep(5)
    held = phoenix.spans(project)
    assert len(held) == spans
    assert len({s["context"]["span_id"] for s in held}) == spans, "every span once"
    assert len({s["context"]["trace_id"] for s in held}) == 1, "one trace"
    (agent,) = [s for s in held if s["parent_id"] is None]
    assert {s["parent_id"] for s in held if s is not agent} == {agent["context"]["span_id"]}
    operations = [s["attributes"].get("gen_ai.operation.name") for s in held]
    assert operations.count("chat") == operations.count("execute_tool") == STEPS
