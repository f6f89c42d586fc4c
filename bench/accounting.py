"""Benchmark 8: the accounting roll-ups on a large store (full: 100,000 runs, 1,000,000
provider calls; --quick: 5,000 / 50,000), on SQLite and, with --pg, on PostgreSQL.

The store: runs with 10 provider calls each over 8 models (1 in 40 names no model, 1 in 30 is a
failure with no usage), stamped over 60 days; 90% of runs finished (`run_outcomes`, 6
outcomes); gate failures on 15% of runs, fallbacks, replans and resumes on a few percent.
Built with raw `sqlite3` into a store made by the chain (at hs3: the triggers count the calls
as they go in), then cached; PostgreSQL gets a `copy_store` of it.

Spend groupings: upstream's way (its `all_provider_calls` read, every call grouped and priced
one by one, here in Python), the plain priced GROUP BY (the Store on a store without hs3), the
first ask with a price table (every group priced and kept), a kept answer, and an answer after
one new call on the newest day; each answer checked equal to upstream's per-call pricing. Run
roll-ups: the Store beside upstream's SQL, raw `sqlite3`, with the candidate's query plan.
Write cost: `record_provider_call` with and without hs3's triggers, alternating call by call.
Each table is written once and run per backend (`bench.stores.Backend`).
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from .common import Config, Table, alternating, fmt_ratio, fmt_time, median, say, timed
from .stores import (
    POSTGRESQL,
    SQLITE,
    Backend,
    backends,
    copy_store,
    empty_head,
    scratch_target,
)

FORMAT = 2
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
    """The spend roll-ups on each backend (PostgreSQL gets a copy of the SQLite store), the run
    roll-ups on SQLite, and the write cost of the triggers on each backend."""
    runs = cfg.pick(100_000, 5_000)
    path = build(cfg, runs)
    tables = []
    for backend in backends(cfg):
        with accounting_store(cfg, backend, path) as target:
            tables.append(_spend_table(cfg, backend, target, runs))
            if backend is SQLITE:
                tables.append(_tally_table(target, runs))
    tables.append(_write_cost(cfg))
    return tables


@contextmanager
def accounting_store(cfg: Config, backend: Backend, built: Path) -> Iterator[Any]:
    """A scratch copy of the built store on `backend`."""
    from harness_store import copy_store as copy_into

    if backend is SQLITE:
        yield copy_store(built, cfg.work / "accounting.sqlite3")
        return
    with scratch_target(cfg, backend, "accounting") as url:
        say(f"accounting: copying the store into {backend.name}")
        copy_into(copy_store(built, cfg.work / "accounting-pg-source.sqlite3"), url)
        yield url


def _upstream_rows(backend: Backend, target: Any) -> Callable[[], Any]:
    """Upstream's `all_provider_calls` read, raw (on PostgreSQL with `date(at)` spelled as it
    can: the first ten characters)."""
    raw = backend.connect(target, True)
    sql = UPSTREAM_ALL_CALLS
    if backend is POSTGRESQL:
        sql = sql.replace("date(at)", "substr(at, 1, 10)")
    return lambda: raw.execute(sql).fetchall()


def _spend_table(cfg: Config, backend: Backend, target: Any, runs: int) -> Table:
    """Each spend grouping: upstream's way, the plain GROUP BY (the Store without hs3), the
    first ask with a price table (every group priced and kept), a kept answer, and an answer
    after one new call on the newest day (that day priced again)."""
    from sqlalchemy import text

    from harness_store import Store
    from harness_store.store.accounting import ROW_KEYS, spend_groups

    store = Store.open(target, upgrade=False, backup=False)
    table_prices = prices()
    rows = _upstream_rows(backend, target)
    rounds = 3
    table = Table(
        f"Spend roll-ups ({runs:,} runs, {runs * CALLS_PER_RUN:,} provider calls, {backend.name})",
        ["roll-up", "upstream's way", "plain GROUP BY (no hs3)", "first ask (prices all, keeps)",
         "kept", "after 1 new call", "kept vs upstream", "same answer"],
    )  # fmt: skip
    last_day = f"2026-{9 + (DAYS - 1) // 30:02d}-{1 + (DAYS - 1) % 30:02d}"
    mid = f"2026-{9 + (DAYS // 2) // 30:02d}-{1 + (DAYS // 2) % 30:02d} 10:04:30"
    new_call = text(
        "INSERT INTO provider_calls (run_id, step, attempt, provider, model, prompt_tokens, "
        "completion_tokens, total_tokens, latency_ms, at) VALUES "
        "(1, 99, 1, 'p', 'gpt-c', 1234, 56, 1290, 7, :at)"
    )

    def forget() -> None:
        with store.engine.begin() as conn:
            conn.execute(text("DELETE FROM hs_spend_priced_days"))
            conn.execute(text("DELETE FROM hs_spend_priced_runs"))

    cases: list[tuple[str, str, str | None]] = [
        ("spend_by_model", "model", None),
        ("spend_by_day", "day", None),
        ("spend_by_run", "run", None),
        (f"spend_by_model since {mid}", "model", mid),
        (f"spend_by_day since {mid}", "day", mid),
    ]
    floor: list[tuple[float, float]] = []
    for name, by, since in cases:
        say(f"accounting: {backend.name} {name}")
        getter = getattr(store, f"spend_by_{by}")
        timings: dict[str, list[float]] = {k: [] for k in ("up", "plain", "cold", "kept", "new")}
        same = True
        for _ in range(rounds):
            if since is None:
                start = time.perf_counter()
                theirs = spend_groups(rows(), table_prices, ROW_KEYS[by])
                timings["up"].append(time.perf_counter() - start)
            else:
                theirs = store._spend_exact(table_prices, ROW_KEYS[by], since)
            timings["plain"].append(
                timed(lambda s=since, b=by: store._spend_plain(table_prices, s, b))
            )
            forget()
            timings["cold"].append(timed(lambda g=getter, s=since: g(table_prices, since=s)))
            start = time.perf_counter()
            kept = getter(table_prices, since=since)
            timings["kept"].append(time.perf_counter() - start)
            same = same and kept == theirs
            with store.engine.begin() as conn:
                conn.execute(new_call, {"at": f"{last_day} 23:{len(timings['new']):02d}:00"})
            start = time.perf_counter()
            after = getter(table_prices, since=since)
            timings["new"].append(time.perf_counter() - start)
            same = same and after == store._spend_plain(table_prices, since, by)
            if by == "run" and since is None:
                floor.append(_floor(kept))
            del theirs, kept, after  # freed here, not inside the next round's timings
        up = median(timings["up"]) if timings["up"] else None
        kept_t = median(timings["kept"])
        if by == "run" and since is None:
            on, off = (median([f[k] for f in floor]) for k in (0, 1))
            table.notes.append(
                f"{backend.name} spend_by_run's floor: its {runs:,} `Spend` records built from "
                f"in-memory tuples as the Store builds them take {fmt_time(on)} "
                f"({fmt_time(off)} with the cyclic collector paused, which the Store never does); "
                f"the kept answer is {fmt_ratio(kept_t / on)} and {fmt_ratio(kept_t / off)} that."
            )
        table.add(
            name,
            fmt_time(up) if up else "— (no `since` upstream)",
            fmt_time(median(timings["plain"])),
            fmt_time(median(timings["cold"])),
            fmt_time(kept_t),
            fmt_time(median(timings["new"])),
            fmt_ratio(up / kept_t) if up else fmt_ratio(median(timings["plain"]) / kept_t),
            table.check(f"{backend.name} {name} agrees with upstream's per-call pricing", same),
        )
    table.notes.append(
        "upstream's way: its `all_provider_calls` read (every call row) grouped and priced per "
        "call in Python (Rust would be faster). plain: one priced GROUP BY over the calls, the "
        "Store's way on a store without hs3. first ask: kept answers deleted first, so every "
        "group is priced and kept. after 1 new call: one call inserted on the newest day (raw "
        "INSERT, counted by the triggers), so that day's groups (or that run) are priced again."
        " The `since` rows compare with the plain GROUP BY (upstream has no window)."
    )
    store.close()
    return table


def _tally_table(path: Path, runs: int) -> Table:
    """The run roll-ups over `run_outcomes` and the event tables, beside upstream's SQL."""
    from harness_store import Store, Tally

    store = Store.open(path, upgrade=False, read_only=True)
    raw = sqlite3.connect(path, isolation_level=None)
    rounds = 3

    def upstream_tally(name: str) -> Any:
        rows = raw.execute(UPSTREAM_SQL[name]).fetchall()
        if name in ("first_try", "recovery"):
            return tuple(rows[0])
        return [Tally("(none)" if k is None else k, n) for k, n in rows]

    def ours_tally(name: str) -> Any:
        value = getattr(store, name)()
        if name == "first_try":
            return (value.runs, value.succeeded, value.first_try)
        if name == "recovery":
            return (value.fallbacks, value.replans, value.resumes)
        return value

    table = Table(
        f"Run roll-ups ({runs:,} runs, SQLite)",
        ["roll-up", "Store", "upstream's SQL (raw sqlite3)", "speed-up", "same answer",
         "candidate plan"],
    )  # fmt: skip
    with store.engine.connect() as conn:
        compiled = _candidate_sql(store, prices(), conn)
    for name in UPSTREAM_SQL:
        same = ours_tally(name) == upstream_tally(name)
        t_ours = median([timed(lambda n=name: ours_tally(n)) for _ in range(rounds)])
        t_theirs = median([timed(lambda n=name: upstream_tally(n)) for _ in range(rounds)])
        table.add(
            name,
            fmt_time(t_ours),
            fmt_time(t_theirs),
            fmt_ratio(t_theirs / t_ours),
            table.check(f"{name} agrees with upstream", same),
            plan(raw, compiled[name]),
        )
    store.close()
    raw.close()
    return table


def _write_cost(cfg: Config) -> Table:
    """`record_provider_call` on a store with hs3's triggers against the same store without
    them, alternating call by call (each its own transaction, as the run loop writes)."""
    from harness_store import ProviderCall, Store, Usage

    n, window = cfg.pick(3000, 600), cfg.pick(100, 50)
    table = Table(
        f"record_provider_call with and without hs3's triggers ({n:,} calls each, alternating)",
        ["backend", "synchronous", "with triggers", "without", "ratio"],
    )
    call = ProviderCall(1, 1, "p", "gpt-c", Usage(1200, 80, 1280, 100, 10, 5, 1), 300, 20, "stop")
    cases: list[tuple[Backend, str | None]] = [(SQLITE, "full"), (SQLITE, "normal")]
    if cfg.pg:
        cases.append((POSTGRESQL, None))
    for backend, sync in cases:
        level = f"_{sync}" if sync else ""
        with ExitStack() as stack:
            stores = [
                stack.enter_context(
                    Store.open(
                        stack.enter_context(scratch_target(cfg, backend, f"w{k}{level}")),
                        backup=False,
                        synchronous=sync,
                    )
                )
                for k in "ab"
            ]
            bare = stores[1]
            with bare.engine.begin() as conn:
                for statement in bare.backend.drop_spend_triggers_sql():
                    conn.exec_driver_sql(statement)
            run_ids = [s.start_run("g", "f") for s in stores]
            ops = [
                (name, lambda i, s=s, r=r: s.record_provider_call(r, call))
                for name, s, r in zip(("with", "without"), stores, run_ids, strict=True)
            ]
            times = alternating(ops, n, window, warmup=50)
        w, wo = median(times["with"]), median(times["without"])
        table.add(
            backend.name, sync or "(server default)", fmt_time(w), fmt_time(wo), fmt_ratio(w / wo)
        )
    table.notes.append(
        "Per call: the mean of each window of calls, median over windows; the two stores are "
        "written call by call in turn, so both see the same machine."
    )
    return table


def _floor(answer: list[Any]) -> tuple[float, float]:
    """The time to build `answer`'s records again from plain tuples of their values, as the
    Store builds them (no database, no sorting): what any way of answering pays at least,
    with Python's cyclic collector on (as the Store runs), and paused."""
    import gc
    from dataclasses import astuple

    from harness_store.records.accounting import spend_from_row

    rows = [(s.key, s.calls, *astuple(s.usage), s.cost_micros, s.unpriced_calls)
            for s in answer]  # fmt: skip
    times = []
    for paused in (False, True):
        gc.collect()
        if paused:
            gc.disable()
        start = time.perf_counter()
        built = [spend_from_row(*row) for row in rows]
        times.append(time.perf_counter() - start)
        gc.enable()
        assert built == answer
        del built
    return times[0], times[1]


def _candidate_sql(store: Any, table_prices: Any, conn: Any) -> dict[str, str]:
    """The SQL text of the Store's candidate statements, literal values in place, for plans."""
    from sqlalchemy import case, func, select

    from harness_store import models as m
    from harness_store.models.spend import USAGE_SUMS
    from harness_store.store.price_sql import counter, price_case

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
        has_usage = c.total_tokens.is_not(None)
        sums = [func.sum(case((has_usage, counter(n)), else_=0)) for n in USAGE_SUMS]
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
