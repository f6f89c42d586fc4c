"""Benchmark 7: the accounting roll-ups on a large store (full: 100,000 runs, 1,000,000
provider calls; --quick: 5,000 / 50,000).

The store: runs with 10 provider calls each over 8 models (1 in 40 names no model, 1 in 30 is a
failure with no usage), stamped over 60 days; 90% of runs finished (`run_outcomes`, 6
outcomes); gate failures on 15% of runs, fallbacks, replans and resumes on a few percent.
Built with raw `sqlite3` into a store made by the chain, then cached.

Candidate: the Store's method (SQLite, through SQLAlchemy). Baseline: upstream 0.66's own SQL
for the same roll-up, raw `sqlite3`, on the same file — for the three spend groupings that is
upstream's `all_provider_calls` read (every call row) grouped and priced the way upstream does
in Rust (`spend_groups`), so the baseline pays Python for what Rust does natively; the raw read
alone is shown too. Each answer is checked equal to the baseline's. The query plan column says
whether SQLite answers the candidate from an index (`EXPLAIN QUERY PLAN`).
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Config, Table, copy_store, empty_head, fmt_ratio, fmt_time, median, say

FORMAT = 1
CALLS_PER_RUN = 10
DAYS = 60
MODELS = ["claude-a", "claude-b", "gpt-c", "gpt-d", "gemini-e", "llama-f", "mistral-g", "qwen-h"]
OUTCOMES = ["success", "success", "success", "stalled", "step_cap", "failed", "escalated"]

UPSTREAM_ALL_CALLS = """SELECT run_id, date(at), step, attempt, provider, model, prompt_tokens,
        completion_tokens, total_tokens, cache_read_tokens, cache_write_tokens,
        reasoning_tokens, server_tool_requests, latency_ms, ttft_ms, finish_reason, failure
 FROM provider_calls ORDER BY id"""
UPSTREAM_SQL = {
    "runs_by_outcome": "SELECT outcome, COUNT(*) FROM run_outcomes GROUP BY outcome "
    "ORDER BY outcome",
    "runs_by_day": "SELECT date(finished_at), COUNT(*) FROM run_outcomes "
    "GROUP BY date(finished_at) ORDER BY date(finished_at)",
    "first_try": """SELECT COUNT(*), COALESCE(SUM(success), 0),
        COALESCE(SUM(success = 1 AND NOT EXISTS (SELECT 1 FROM sandbox_events e
            WHERE e.run_id = run_outcomes.run_id AND e.kind = 'gate_phase_failed')), 0)
        FROM run_outcomes""",
    "gate_failures_by_phase": "SELECT detail, COUNT(*) FROM sandbox_events "
    "WHERE kind = 'gate_phase_failed' GROUP BY detail ORDER BY detail",
    "recovery": "SELECT (SELECT COUNT(*) FROM context_events WHERE kind = 'served'), "
    "(SELECT COUNT(*) FROM context_events WHERE kind = 'replan'), "
    "(SELECT COUNT(*) FROM checkpoint_events WHERE kind = 'resume')",
}


def prices() -> Any:
    from harness_store import Price, PriceTable, PriceTier

    table = PriceTable.new("2026-11-30")
    for i, model in enumerate(MODELS[:-1]):  # the last model is unpriced
        table = table.with_(
            model,
            Price(
                input=1_000_000 + 250_000 * i,
                output=5_000_000 + i,
                cache_read=100_000,
                cache_write=1_250_000,
                per_server_tool_request=10_000,
            ),
        )
    return table.with_tiers(
        MODELS[0], [PriceTier(200_000, Price(input=2_000_000, output=10_000_000))]
    )


def build(cfg: Config, runs: int) -> Path:
    stem = f"accounting-{runs}x{CALLS_PER_RUN}-v{FORMAT}"
    path = cfg.cache / f"{stem}.sqlite3"
    if path.exists():
        say(f"accounting: reusing {path.name}")
        return path
    building = cfg.cache / f"{stem}.building.sqlite3"
    copy_store(empty_head(cfg), building)
    say(f"accounting: building {runs:,} runs / {runs * CALLS_PER_RUN:,} provider calls")
    rng = random.Random(7)
    start = time.perf_counter()
    conn = sqlite3.connect(building, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")

    def day(i: int) -> str:
        return f"2026-{9 + i // 30:02d}-{1 + i % 30:02d}"

    conn.executemany(
        "INSERT INTO runs (id, goal, file, status, started_at) VALUES (?, 'goal', 'f', ?, ?)",
        ((r, "completed", f"{day(r % DAYS)}T10:00:00.000Z") for r in range(1, runs + 1)),
    )

    def calls() -> Any:
        for r in range(1, runs + 1):
            d = day(r % DAYS)
            for a in range(CALLS_PER_RUN):
                model = None if rng.random() < 1 / 40 else rng.choice(MODELS)
                if rng.random() < 1 / 30:
                    yield (
                        r,
                        a + 1,
                        1,
                        "p",
                        model,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        None,
                        rng.randint(50, 900),
                        None,
                        None,
                        "timeout",
                        f"{d} 10:{a:02d}:00",
                    )
                    continue
                prompt = rng.randint(500, 250_000)
                completion = rng.randint(10, 4_000)
                yield (
                    r,
                    a + 1,
                    1,
                    "p",
                    model,
                    prompt,
                    completion,
                    prompt + completion,
                    rng.randint(0, prompt // 2),
                    rng.randint(0, 2_000),
                    rng.randint(0, 500),
                    rng.randint(0, 2),
                    rng.randint(50, 9_000),
                    rng.randint(20, 800),
                    "stop",
                    None,
                    f"{d} 10:{a:02d}:00",
                )

    conn.executemany(
        "INSERT INTO provider_calls (run_id, step, attempt, provider, model, prompt_tokens, "
        "completion_tokens, total_tokens, cache_read_tokens, cache_write_tokens, "
        "reasoning_tokens, server_tool_requests, latency_ms, ttft_ms, finish_reason, failure, "
        "at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        calls(),
    )
    finished = [r for r in range(1, runs + 1) if r % 10]
    conn.executemany(
        "INSERT INTO run_outcomes (run_id, outcome, success, steps, tokens, duration_ms, "
        "finished_at) VALUES (?, ?, ?, 10, 1000, 5000, ?)",
        (
            (r, o, int(o == "success"), f"{day(r % DAYS)}T11:00:00.000Z")
            for r in finished
            for o in [OUTCOMES[r % len(OUTCOMES)]]
        ),
    )
    phases = ["compile", "criterion-compile", "test-run", None]
    conn.executemany(
        "INSERT INTO sandbox_events (run_id, step, kind, backend, detail) "
        "VALUES (?, 2, 'gate_phase_failed', NULL, ?)",
        ((r, phases[r % 4]) for r in range(1, runs + 1) if r % 7 == 0),
    )
    conn.executemany(
        "INSERT INTO sandbox_events (run_id, step, kind, backend, detail) "
        "VALUES (?, 1, 'exec', 'landlock', 'cargo test')",
        ((r,) for r in range(1, runs + 1)),
    )
    conn.executemany(
        "INSERT INTO context_events (run_id, step, kind, detail) VALUES (?, 1, ?, 'x')",
        (
            (r, k)
            for r in range(1, runs + 1)
            for k in [
                "assembled",
                "served" if r % 25 == 0 else "assembled",
                "replan" if r % 40 == 0 else "assembled",
            ]
        ),
    )
    conn.executemany(
        "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (?, 1, ?, NULL)",
        ((r, "resume" if r % 50 == 0 else "checkpoint") for r in range(1, runs + 1)),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    building.rename(path)
    say(f"accounting: built in {time.perf_counter() - start:.0f} s")
    return path


def plan(conn: sqlite3.Connection, sql: str, params: Any = ()) -> str:
    rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    return "; ".join(r[-1] for r in rows)


def run(cfg: Config) -> list[Table]:
    from harness_store import Store, Tally
    from harness_store.store.accounting import spend_groups

    runs = cfg.pick(100_000, 5_000)
    path = build(cfg, runs)
    store = Store.open(path, upgrade=False, read_only=True)
    raw = sqlite3.connect(path, isolation_level=None)
    table_prices = prices()
    rounds = 3

    def upstream_spend(key: Callable[..., str]) -> Any:
        return spend_groups(raw.execute(UPSTREAM_ALL_CALLS), table_prices, key)

    def upstream_tally(name: str) -> Any:
        rows = raw.execute(UPSTREAM_SQL[name]).fetchall()
        if name == "first_try":
            return tuple(rows[0])
        if name == "recovery":
            return tuple(rows[0])
        return [Tally("(none)" if k is None else k, n) for k, n in rows]

    def ours_tally(name: str) -> Any:
        value = getattr(store, name)()
        if name == "first_try":
            return (value.runs, value.succeeded, value.first_try)
        if name == "recovery":
            return (value.fallbacks, value.replans, value.resumes)
        return value

    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], str]] = [
        (
            "spend_by_model",
            lambda: store.spend_by_model(table_prices),
            lambda: upstream_spend(lambda r, d, c: c.model or "(unknown model)"),
            "spend",
        ),
        (
            "spend_by_day",
            lambda: store.spend_by_day(table_prices),
            lambda: upstream_spend(lambda r, d, c: d),
            "spend",
        ),
        (
            "spend_by_run",
            lambda: store.spend_by_run(table_prices),
            lambda: upstream_spend(lambda r, d, c: str(r)),
            "spend",
        ),
    ]
    for name in UPSTREAM_SQL:
        cases.append((name, lambda n=name: ours_tally(n), lambda n=name: upstream_tally(n), name))
    fetch_all = median(
        [_timed(lambda: raw.execute(UPSTREAM_ALL_CALLS).fetchall()) for _ in range(rounds)]
    )

    table = Table(
        f"Accounting roll-ups ({runs:,} runs, {runs * CALLS_PER_RUN:,} provider calls, SQLite)",
        [
            "roll-up",
            "Store",
            "upstream's SQL (raw sqlite3)",
            "speed-up",
            "same answer",
            "candidate plan",
        ],
    )
    with store.engine.connect() as conn:
        compiled = _candidate_sql(store, table_prices, conn)
    for name, ours, theirs, _ in cases:
        same = ours() == theirs()
        t_ours = median([_timed(ours) for _ in range(rounds)])
        t_theirs = median([_timed(theirs) for _ in range(rounds)])
        sql = compiled.get(name)
        how = plan(raw, sql) if sql else "—"
        table.add(
            name,
            fmt_time(t_ours),
            fmt_time(t_theirs),
            fmt_ratio(t_theirs / t_ours),
            table.check(f"{name} agrees with upstream", same),
            how,
        )
    table.notes.append(
        f"upstream's `all_provider_calls` read alone (fetchall, no grouping): {fmt_time(fetch_all)}"
        " — what Rust pays before its grouping; the Store's spend query must read the same rows"
    )
    table.notes.append(
        "No index of upstream's schema serves a spend grouping: `provider_calls` has only "
        "`provider_calls_run (run_id)`, so each grouping scans the table once (SCAN + a temp "
        "B-tree for GROUP BY). The roll-ups over `run_outcomes`, `sandbox_events`, "
        "`context_events` and `checkpoint_events` use upstream's 0.30 indexes."
    )
    store.close()
    raw.close()
    return [table]


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _candidate_sql(store: Any, table_prices: Any, conn: Any) -> dict[str, str]:
    """The SQL text of the Store's candidate statements, literal values in place, for plans."""
    from sqlalchemy import case, func, select

    from harness_store import models as m
    from harness_store.store.accounting import USAGE_COLUMNS, _u, price_case

    c = m.ProviderCall

    def text(statement: Any) -> str:
        return str(statement.compile(conn, compile_kwargs={"literal_binds": True}))

    out = {}
    for name, key in (
        ("spend_by_model", func.coalesce(c.model, "(unknown model)")),
        ("spend_by_day", func.substr(c.at, 1, 10)),
        ("spend_by_run", c.run_id),
    ):
        cost = price_case(table_prices)
        sums = [
            func.sum(case((c.total_tokens.is_not(None), _u(n)), else_=0)) for n in USAGE_COLUMNS
        ]
        out[name] = text(
            select(key, func.count(), *sums, func.sum(cost), func.count(cost)).group_by(key)
        )
    o, e = m.RunOutcome, m.SandboxEvent
    out["runs_by_outcome"] = text(select(o.outcome, func.count()).group_by(o.outcome))
    day = func.substr(o.finished_at, 1, 10)
    out["runs_by_day"] = text(select(day, func.count()).group_by(day))
    out["gate_failures_by_phase"] = text(
        select(e.detail, func.count()).where(e.kind == "gate_phase_failed").group_by(e.detail)
    )
    out["first_try"] = UPSTREAM_SQL["first_try"]  # the Store's is the same shape
    out["recovery"] = UPSTREAM_SQL["recovery"]
    return out


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps("run through bench.run"))
