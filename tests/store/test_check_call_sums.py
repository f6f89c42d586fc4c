"""`check` of a store whose provider calls, written by another writer, sum past 2⁶³−1 for one
run (and one day and model): it reports, it does not stop on SQLite's integer overflow, and
both backends agree."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from harness_store import ProviderCall, Store, Usage

BIG = 2**62 + 7
"""Two calls of this many tokens sum past 2⁶³−1."""


def test_check_reports_on_calls_whose_sum_passes_the_integer_limit(
    tmp_path: Path, store_target: str
) -> None:
    with Store.open(store_target) as store:
        run = store.start_run("goal", "plan.toml")
        store.record_provider_call(run, ProviderCall(1, 1, "p", "m", Usage(1, 1, 2), 5))
        store.finish_run(run, "success")
        store.check()  # the counters as the Store keeps them
    url = store_target if "://" in store_target else f"sqlite:///{store_target}"
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:  # as another writer writes them, past the Store's door
        for attempt in (2, 3):
            conn.execute(
                text(
                    "INSERT INTO provider_calls (run_id, step, attempt, provider, model, "
                    "prompt_tokens, completion_tokens, total_tokens, latency_ms, at) "
                    "VALUES (:run, 1, :attempt, 'p', 'm', :big, 0, :big, 5, "
                    "'2026-01-01T00:00:00.000Z')"
                ),
                {"run": run, "attempt": attempt, "big": BIG},
            )
    engine.dispose()
    with Store.open(store_target, read_only=True) as store:
        report = store.check()
    kinds = {f.kind.value for f in report.findings}
    assert kinds <= {"spend_counter", "run_tokens"}, kinds
