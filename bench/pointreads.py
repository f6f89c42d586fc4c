"""Benchmark 15: the point reads a harness makes per resume and per finished run, beside the
driver.

A 1,000-step run, finished. The resume sequence (`check_resumable`, `last_step`,
`spent_tokens`; and the same answers in one read, `resume_point`), `run_summary`, one
step's record (`step(run, n)`, `last_step_record(run)`: the content a resuming agent reads,
beside the driver's own SELECT of the same row), and one step's trace
(`trace_entries(run, first_step=k, last_step=k)`: one statement over every trace table, no
target, beside the driver's SELECT of the step's row; and the same window read the long way,
a cursor per table, as every window was read before), beside
the same answers read with the raw driver on one connection (on SQLite: `PRAGMA
user_version`, the run's kind and status, `MAX(step)`, the token sum; on PostgreSQL the same
four statements in autocommit). Variants alternate in rounds; on SQLite the figure is CPU time
(`time.process_time`: the client's work, as the file is in the page cache), on PostgreSQL wall
time (round trips).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness_store.store import trace_view
from harness_store.store.trace_view import TraceView

from .common import Config, Table, fmt_ratio, fmt_time, interleaved, median, say, step_records
from .stores import SQLITE, Backend, backends, scratch_target

RESUME_TARGET = {"SQLite": 5.0, "PostgreSQL": 3.0}
"""The resume sequence: at most this many times the raw driver's (CPU on SQLite, wall on
PostgreSQL)."""
SUMMARY_TARGET = 5.0
"""`run_summary`: at most this many times the raw driver's."""
STEP_TARGET = {"SQLite": 3.0, "PostgreSQL": 1.5}
"""A one-step record (`step`, `last_step_record`): at most this many times the driver's own
SELECT (CPU on SQLite, wall on PostgreSQL)."""
TRACE_CALLS = 10
"""`trace_entries` is timed over one call in this many: it runs a statement per table."""
STEPS = 1_000

FORMAT = {
    "SQLite": "PRAGMA user_version",
    "PostgreSQL": "SELECT user_version FROM harness_user_version",
}
RUN = "SELECT turn_kind, status FROM runs WHERE id = ?"
LAST = "SELECT COALESCE(MAX(step), 0) FROM steps WHERE run_id = ?"
TOKENS = "SELECT COALESCE(SUM(tokens), 0) FROM steps WHERE run_id = ?"
SUMMARY = (
    "SELECT run_id, outcome, success, steps, tokens, duration_ms, finished_at "
    "FROM run_outcomes WHERE run_id = ?"
)
RECORD = "SELECT step, decision, result, prompt, tool_call, tokens FROM steps WHERE run_id = ?"
STEP = f"{RECORD} AND step = ? ORDER BY step DESC, id DESC LIMIT 1"
LAST_RECORD = f"{RECORD} ORDER BY step DESC, id DESC LIMIT 1"


def run(cfg: Config) -> list[Table]:
    from harness_store import Store

    table = Table(
        "15. point reads: the resume sequence and run_summary, beside the raw driver",
        ["backend", "read", "clock", "raw", "Store", "Store ÷ raw", "target", "result"],
    )
    calls = cfg.pick(2_000, 400)
    rounds = cfg.pick(7, 5)
    for backend in backends(cfg):
        with scratch_target(cfg, backend, "pointreads") as target:
            store = Store.open(target)
            try:
                run_id = store.start_run("benchmark run", "src/parser.rs")
                store.checkpoint_steps(run_id, step_records(1, STEPS))
                store.finish_run(run_id, "success")
                raw = backend.connect(target, True)
                try:
                    say(f"{backend.name} point reads, {calls} calls x {rounds} rounds")
                    rows = measure(backend, store, raw, run_id, calls, rounds)
                finally:
                    raw.close()
            finally:
                store.close()
        clock = "CPU" if backend is SQLITE else "wall"
        for name, raw_t, store_t, target_ratio in rows:
            ratio = store_t / raw_t
            if target_ratio is None:
                target_cell, verdict = "—", "—"
            else:
                target_cell = f"≤ {target_ratio:g}×"
                verdict = table.check(
                    f"{backend.name} {name} ≤ {target_ratio:g}× raw ({clock})",
                    ratio <= target_ratio,
                )
            table.add(
                backend.name,
                name,
                clock,
                fmt_time(raw_t),
                fmt_time(store_t),
                fmt_ratio(ratio),
                target_cell,
                verdict,
            )
    table.notes.append(
        f"a {STEPS:,}-step finished run; per call, the median over {rounds} alternating rounds "
        f"of {calls} calls; raw: one connection (autocommit on PostgreSQL), the same answers"
    )
    return [table]


def measure(
    backend: Backend, store: Any, raw: Any, run_id: int, calls: int, rounds: int
) -> list[tuple[str, float, float, float | None]]:
    clock: Callable[[], float] = time.process_time if backend is SQLITE else time.perf_counter
    cursor = raw.cursor()
    one = (run_id,)
    fmt, run_sql, last, tokens, summary, step_sql, last_record = (
        backend.sql(s) if s != FORMAT[backend.name] else s
        for s in (FORMAT[backend.name], RUN, LAST, TOKENS, SUMMARY, STEP, LAST_RECORD)
    )
    middle = (run_id, STEPS // 2)

    def raw_resume() -> None:
        cursor.execute(fmt).fetchone()
        cursor.execute(run_sql, one).fetchone()
        cursor.execute(last, one).fetchone()
        cursor.execute(tokens, one).fetchone()

    def store_resume() -> None:
        store.check_resumable(run_id)
        store.last_step(run_id)
        store.spent_tokens(run_id)

    def store_resume_point() -> None:
        store.resume_point(run_id)

    def raw_summary() -> None:
        cursor.execute(summary, one).fetchone()

    def store_summary() -> None:
        store.run_summary(run_id)

    def raw_step() -> None:
        cursor.execute(step_sql, middle).fetchone()

    def store_step() -> None:
        store.step(run_id, STEPS // 2)

    def raw_last_record() -> None:
        cursor.execute(last_record, one).fetchone()

    def store_last_record() -> None:
        store.last_step_record(run_id)

    def store_step_trace() -> None:
        list(TraceView(store).entries(run_id, first_step=STEPS // 2, last_step=STEPS // 2))

    def per_call(fn: Callable[[], None], n: int = calls) -> Callable[[], float]:
        def timed() -> float:
            start = clock()
            for _ in range(n):
                fn()
            return (clock() - start) / n

        return timed

    out: list[tuple[str, float, float, float | None]] = []
    for name, raw_fn, store_fn, target in (
        ("resume (check_resumable, last_step, spent_tokens)", raw_resume, store_resume,
         RESUME_TARGET[backend.name]),
        ("resume in one read (resume_point)", raw_resume, store_resume_point,
         RESUME_TARGET[backend.name]),
        ("run_summary", raw_summary, store_summary, SUMMARY_TARGET),
        ("one step's record (step)", raw_step, store_step, STEP_TARGET[backend.name]),
        ("the last step's record (last_step_record)", raw_last_record, store_last_record,
         STEP_TARGET[backend.name]),
    ):  # fmt: skip
        times = interleaved([("raw", per_call(raw_fn)), ("store", per_call(store_fn))], rounds)
        out.append((name, median(times["raw"]), median(times["store"]), target))

    def long_way_trace() -> None:
        short, trace_view.SHORT_WINDOW = trace_view.SHORT_WINDOW, 0
        try:
            store_step_trace()
        finally:
            trace_view.SHORT_WINDOW = short

    few = max(1, calls // TRACE_CALLS)
    times = interleaved(
        [("raw", per_call(raw_step, few)), ("store", per_call(store_step_trace, few)),
         ("long", per_call(long_way_trace, few))],
        rounds,
    )  # fmt: skip
    name = "one step's trace (trace_entries(run, k, k)), one statement"
    out.append((name, median(times["raw"]), median(times["store"]), None))
    name = "the same, read the long way (a cursor per table, as before)"
    out.append((name, median(times["raw"]), median(times["long"]), None))
    return out
