"""One long run, written with `sqlite3` directly in one transaction as a store holding it would
be (fast at 100,000 steps): every step with a tool call and a provider call stamped a second
apart, the run completed with its summary."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from harness_store import Store


def long_run(path: Path, steps: int) -> int:
    """A store at `path` holding one completed run of `steps` steps; the run's id."""
    Store.open(path).close()
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        with conn:
            run = conn.execute(
                "INSERT INTO runs (goal, file, status, outcome, started_at) VALUES "
                "('a long run', '/repo', 'completed', 'success', '2026-08-01T00:00:00.000Z')"
            ).lastrowid
            assert run is not None
            call = 'edit_file:{"path":"src/%d.rs"}'
            steps_rows = (
                (run, n, f"edit step {n}", f"ok {n}", f"prompt {n}", call % n, 100)
                for n in range(1, steps + 1)
            )
            conn.executemany(
                "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                steps_rows,
            )
            conn.executemany(
                "INSERT INTO provider_calls (run_id, step, attempt, provider, model, "
                "prompt_tokens, completion_tokens, total_tokens, latency_ms, finish_reason, at) "
                "VALUES (?, ?, 1, 'anthropic', 'claude-sonnet-4-5', 1000, 100, 1100, 800, "
                "'tool_use', ?)",
                (
                    (run, n, f"2026-08-01 {n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}")
                    for n in range(1, steps + 1)
                ),
            )
            conn.execute(
                "INSERT INTO run_outcomes (run_id, outcome, success, steps, tokens, duration_ms, "
                "finished_at) VALUES (?, 'success', 1, ?, ?, ?, '2026-08-02T00:00:00.000Z')",
                (run, steps, 100 * steps, 86_400_000),
            )
    finally:
        conn.close()
    return int(run)
