"""Benchmark 10: `harness_store.sync` of N stores of 10k steps into PostgreSQL, against psycopg
`COPY` of the same rows read from the same files, in the same run; and a sync with nothing new.

Each source store holds 10 runs of 1,000 realistic steps (checkpointed through `Store`, so also
10,000 checkpoint markers) and their outcomes. Both variants read every source with SQLite and
write a fresh database built by the chain: `sync` with its id maps and marks, one transaction
per store; the baseline COPYs runs (ids offset per store), steps, checkpoint events and
outcomes, one transaction per store. Then a second `sync` of the same stores finds nothing new.
Targets: sync ≥ 0.7× COPY's rows/s; a sync with nothing new < 100 ms per store.

Then `copy` against `sync` of one store into a fresh PostgreSQL database, side by side in the
same run (they move the same rows through the same bulk path): a store of 1,000 runs with
20,000 provider calls, and a store of 100,000 steps. Target: copy at least as fast as sync.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from .common import Config, Table, fmt_rate, fmt_ratio, fmt_time, median, say, spread, step_records
from .stores import copy_store, pg_conninfo, pg_database

RUNS_PER_STORE = 10


def template(cfg: Config, steps: int) -> Path:
    """A store of `RUNS_PER_STORE` finished runs of `steps // RUNS_PER_STORE` steps (cached)."""
    from harness_store import Store

    path = cfg.cache / f"sync-template-{steps}.sqlite3"
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        per_run = steps // RUNS_PER_STORE
        with Store.open(partial, synchronous="off", backup=False) as store:
            for n in range(RUNS_PER_STORE):
                run = store.start_run(f"bench run {n}", "src/parser.rs")
                store.checkpoint_steps(run, step_records(1, per_run))
                store.finish_run(run, "success")
        partial.rename(path)
        Path(f"{partial}-writers").unlink(missing_ok=True)  # the Store's writer-queue file
    return path


STATE_ROWS = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {steps})
INSERT INTO {table} SELECT {values} FROM n
"""
STATE_TABLES = (
    (
        "context_events (run_id, step, kind, detail, est_tokens, reported_tokens)",
        "1 + i % 10, i, 'assembled', 'files: src/parser.rs, tests ' || i, 1000, 900",
    ),
    (
        "tool_attempts (run_id, step, tool, completed_at, resolution)",
        "1 + i % 10, i, 'edit_file', '2026-01-01T00:00:00.000Z', 'ok'",
    ),
    (
        "step_turns (run_id, step, text, calls)",
        "1 + i % 10, i, 'editing the parser', '[{\"name\":\"edit_file\"}]'",
    ),
)


def with_state_rows(base: Path, path: Path, steps: int) -> Path:
    """A copy of `base` with a context event, a tool attempt and a staged turn per step: the
    tables upstream updates in place, which every sync hashes whole."""
    copy_store(base, path)
    with closing(sqlite3.connect(path)) as conn, conn:
        for table, values in STATE_TABLES:
            conn.execute(STATE_ROWS.format(steps=steps, table=table, values=values))
    return path


def copy_baseline(sources: list[Path], url: Any) -> int:
    """COPY every source's runs, steps, checkpoint events and outcomes into the database at
    `url`, run ids offset per store, one transaction per store; the rows written."""
    import psycopg

    tables = {
        "runs": ("id", "goal", "file", "outcome", "status", "started_at"),
        "steps": ("run_id", "step", "decision", "result", "prompt", "tool_call", "tokens"),
        "checkpoint_events": ("run_id", "step", "kind", "detail"),
        "run_outcomes": (
            "run_id",
            "outcome",
            "success",
            "steps",
            "tokens",
            "duration_ms",
            "finished_at",
        ),
    }
    rows = 0
    with psycopg.connect(pg_conninfo(url)) as conn:
        for index, source in enumerate(sources):
            offset = (index + 1) * 1_000_000
            with closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src:
                with conn.cursor() as cursor:
                    for table, columns in tables.items():
                        query = f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid"
                        key = 0 if columns[0] in ("id", "run_id") else None
                        with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                            for row in src.execute(query):
                                if key is not None:
                                    row = (row[0] + offset, *row[1:])
                                copy.write_row(row)
                                rows += 1
                conn.commit()
    return rows


def provider_store(cfg: Config, runs: int, calls: int) -> Path:
    """A store of `runs` finished runs and `calls` provider calls spread over them (cached)."""
    from harness_store import Store

    path = cfg.cache / f"sync-provider-{runs}-{calls}.sqlite3"
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        with Store.open(partial, synchronous="off", backup=False) as store:
            for n in range(runs):
                store.finish_run(store.start_run(f"bench run {n}", "src/lib.rs"), "success")
        with closing(sqlite3.connect(partial)) as conn, conn:
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                "INSERT INTO provider_calls (run_id, step, attempt, provider, model, "
                "prompt_tokens, completion_tokens, total_tokens, latency_ms, finish_reason) "
                "SELECT 1 + i % ?, 1 + i / ?, 1, 'anthropic', 'claude', 1200 + i % 97, "
                "300 + i % 31, 1500 + i % 128, 800 + i % 400, 'end_turn' FROM n",
                (calls, runs, runs),
            )
        partial.rename(path)
        Path(f"{partial}-writers").unlink(missing_ok=True)
    return path


def copy_against_sync(cfg: Config) -> Table:
    """`copy` and `sync` of the same store into fresh PostgreSQL databases, alternating."""
    from harness_store.sync import sync
    from harness_store.transfer import copy_store as copy_into

    assert cfg.pg is not None
    stores = {
        f"{cfg.pick(1000, 200):,} runs, {cfg.pick(20_000, 4_000):,} provider calls": (
            provider_store(cfg, cfg.pick(1000, 200), cfg.pick(20_000, 4_000))
        ),
        f"{cfg.pick(100_000, 10_000):,} steps": template(cfg, cfg.pick(100_000, 10_000)),
    }
    table = Table(
        "10b. copy against sync of one store into PostgreSQL",
        ["store", "copy", "sync", "copy vs sync", "target", "result"],
    )
    for label, source in stores.items():
        times: dict[str, list[float]] = {"copy": [], "sync": []}
        for round_ in range(cfg.pick(3, 1)):
            say(f"copy vs sync: {label}, round {round_ + 1}")
            with pg_database(cfg.pg, f"hs_bench_copy_vs_{round_}") as url:
                start = time.perf_counter()
                copy_into(source, url)
                times["copy"].append(time.perf_counter() - start)
            with pg_database(cfg.pg, f"hs_bench_sync_vs_{round_}") as url:
                start = time.perf_counter()
                sync([source], url)
                times["sync"].append(time.perf_counter() - start)
        ratio = median(times["sync"]) / median(times["copy"])
        table.add(
            label,
            fmt_time(median(times["copy"])),
            fmt_time(median(times["sync"])),
            fmt_ratio(ratio),
            "≥ 1.00×",
            table.check(f"copy of {label} at least as fast as sync", ratio >= 1.0),
        )
    table.notes.append(
        "Each time includes building the schema in a fresh database (copy runs the chain; "
        "sync opens the store as `Store.open` does); 'copy vs sync' is sync's time over "
        "copy's (above 1: copy is faster)"
    )
    return table


def tree_store(cfg: Config, roots: int, children: int, steps: int) -> Path:
    """A store of `roots` finished root runs, each with `children` sub-agent runs of `steps`
    steps, as io-harness lays a tree out (a child's id above its parent's); cached."""
    from harness_store import Store

    path = cfg.cache / f"sync-trees-{roots}-{children}-{steps}-v2.sqlite3"
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        Store.open(partial, synchronous="off", backup=False).close()
        per_tree = 1 + children
        with closing(sqlite3.connect(partial)) as conn, conn:
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                "INSERT INTO runs (id, goal, file, outcome, parent_run_id, depth, status, "
                "started_at) SELECT i + 1, 'bench run ' || i, 'src/lib.rs', 'success', "
                "CASE WHEN i % ? = 0 THEN NULL ELSE i - i % ? + 1 END, "
                "CASE WHEN i % ? = 0 THEN 0 ELSE 1 END, 'completed', "
                "'2026-01-01T00:00:00.000Z' FROM n",
                (roots * per_tree - 1, per_tree, per_tree, per_tree),
            )
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                "INSERT INTO steps (run_id, step, decision, result) "
                "SELECT 1 + i / ?, 1 + i % ?, 'read the file ' || i, 'ok' FROM n",
                (roots * per_tree * steps - 1, steps, steps),
            )
        partial.rename(path)
        Path(f"{partial}-writers").unlink(missing_ok=True)
    return path


def trees(cfg: Config, roots: int | None = None, rounds: int | None = None) -> Table:
    """`sync` of a store of sub-agent trees, and of a store of as many root runs, into fresh
    PostgreSQL databases, each against psycopg COPY of the same runs and steps, alternating
    (`roots` trees of ten runs; 1,000 unless given)."""
    from harness_store import Store
    from harness_store.sync import sync

    assert cfg.pg is not None
    roots = roots or cfg.pick(1000, 200)
    children, steps = 9, 3
    shapes = {
        f"{roots:,} trees of {1 + children} runs": (roots, children),
        f"{roots * (1 + children):,} root runs": (roots * (1 + children), 0),
    }
    table = Table(
        f"10c. sync of a store of {roots * (1 + children):,} runs into PostgreSQL, as trees "
        "of sub-agents and as root runs",
        ["store", "variant", "median", "rows/s", "noise", "vs COPY", "target", "result"],
    )
    rows = {"sync": 0, "copy": 0}
    per_round: dict[str, list[str]] = {}
    for label, (tops, below) in shapes.items():
        source = tree_store(cfg, tops, below, steps)
        times: dict[str, list[float]] = {"sync": [], "copy": []}
        for round_ in range(rounds or cfg.pick(5, 3)):
            say(f"sync of {label}: round {round_ + 1}")
            with pg_database(cfg.pg, f"hs_bench_trees_sync_{round_}") as url:
                Store.open(url).close()  # the chain's schema, outside the timing
                sync([], url)
                start = time.perf_counter()
                report = sync([source], url)
                times["sync"].append(time.perf_counter() - start)
                rows["sync"] = sum(report.origins[0].counts.inserted.values())
            with pg_database(cfg.pg, f"hs_bench_trees_copy_{round_}") as url:
                Store.open(url).close()
                start = time.perf_counter()
                rows["copy"] = tree_copy_baseline(source, url)
                times["copy"].append(time.perf_counter() - start)
            say(f"  sync {times['sync'][-1]:.1f} s, COPY {times['copy'][-1]:.1f} s, "
                f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        each = [
            (rows["sync"] / s) / (rows["copy"] / c)
            for s, c in zip(times["sync"], times["copy"], strict=True)
        ]
        per_round[label] = [fmt_ratio(r) for r in each]
        ratio = median(each)
        for variant, key, shown, target, result in (
            ("psycopg COPY of the same rows", "copy", "1.00×", "", ""),
            (
                "harness_store.sync",
                "sync",
                fmt_ratio(ratio),
                "≥ 0.50×",
                table.check(f"sync of {label} ≥ 0.5× COPY's rows/s", ratio >= 0.5),
            ),
        ):
            table.add(
                label,
                variant,
                fmt_time(median(times[key])),
                fmt_rate(rows[key] / median(times[key])),
                spread(times[key]),
                shown,
                target,
                result,
            )
    table.notes.append(
        "per round, sync's rows/s ÷ COPY's: "
        + "; ".join(f"{label}: {', '.join(ratios)}" for label, ratios in per_round.items())
    )
    table.notes.append(
        f"rows = runs + steps ({rows['sync']:,} a store, {steps} steps a run); in the trees "
        f"{children} of every {1 + children} runs are children whose parent the same sync "
        "sends; each round into fresh databases"
    )
    return table


def tree_copy_baseline(source: Path, url: Any) -> int:
    """COPY the runs (with their parent links) and steps of `source`; the rows written."""
    import psycopg

    tables = {
        "runs": ("id", "goal", "file", "outcome", "parent_run_id", "depth", "status", "started_at"),
        "steps": ("run_id", "step", "decision", "result"),
    }
    rows = 0
    with (
        psycopg.connect(pg_conninfo(url)) as conn,
        closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
        conn.cursor() as cursor,
    ):
        for table, columns in tables.items():
            query = f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid"
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in src.execute(query):
                    copy.write_row(row)
                    rows += 1
        conn.commit()
    return rows


def run(cfg: Config) -> list[Table]:
    from harness_store import Store
    from harness_store.sync import sync

    if not cfg.pg:
        say("sync: skipped (needs --pg)")
        return []
    stores = cfg.pick(20, 3)
    steps = cfg.pick(10_000, 2_000)
    rounds = cfg.pick(3, 2)
    base = template(cfg, steps)
    sources = [copy_store(base, cfg.work / f"sync-src-{n}.sqlite3") for n in range(stores)]
    table = Table(
        f"10. sync of {stores} stores × {steps:,} steps into PostgreSQL",
        ["variant", "median", "rows/s", "noise", "vs COPY", "target", "result"],
    )
    timings: dict[str, list[float]] = {"sync": [], "copy": [], "again": []}
    rows = {"sync": 0, "copy": 0}
    for round_ in range(rounds):
        say(f"sync: round {round_ + 1}/{rounds}")
        with pg_database(cfg.pg, f"hs_bench_sync_{round_}") as url:
            Store.open(url).close()  # the chain's schema, outside the timing
            sync([], url)
            start = time.perf_counter()
            report = sync(sources, url)
            timings["sync"].append(time.perf_counter() - start)
            rows["sync"] = sum(sum(o.counts.inserted.values()) for o in report.origins)
            start = time.perf_counter()
            again = sync(sources, url)
            timings["again"].append((time.perf_counter() - start) / stores)
            assert again.rows == 0
        with pg_database(cfg.pg, f"hs_bench_copy_{round_}") as url:
            Store.open(url).close()
            start = time.perf_counter()
            rows["copy"] = copy_baseline(sources, url)
            timings["copy"].append(time.perf_counter() - start)
    say("sync: nothing new, a store with state rows")
    state_source = with_state_rows(base, cfg.work / "sync-state.sqlite3", steps)
    state_times = []
    with pg_database(cfg.pg, "hs_bench_sync_state") as url:
        sync([state_source], url)
        sync([state_source], url)  # the first no-change sync records the tables' sums
        call_times = []
        for _ in range(cfg.pick(7, 3)):
            start = time.perf_counter()
            again_report = sync([state_source], url)
            call_times.append(time.perf_counter() - start)
            assert again_report.rows == 0
            state_times.append(again_report.origins[0].seconds)
    ratio = median(
        (rows["sync"] / s) / (rows["copy"] / c)
        for s, c in zip(timings["sync"], timings["copy"], strict=True)
    )
    table.add(
        "psycopg COPY of the same rows",
        fmt_time(median(timings["copy"])),
        fmt_rate(rows["copy"] / median(timings["copy"])),
        spread(timings["copy"]),
        "1.00×",
        "",
        "",
    )
    table.add(
        "harness_store.sync",
        fmt_time(median(timings["sync"])),
        fmt_rate(rows["sync"] / median(timings["sync"])),
        spread(timings["sync"]),
        fmt_ratio(ratio),
        "≥ 0.70×",
        table.check(f"sync of {stores} stores ≥ 0.7× COPY's rows/s", ratio >= 0.7),
    )
    per_store = median(timings["again"])
    table.add(
        "sync again, nothing new (per store)",
        fmt_time(per_store),
        "",
        spread(timings["again"]),
        "",
        "< 100 ms",
        table.check("sync with nothing new < 100 ms per store", per_store < 0.1),
    )
    table.add(
        f"sync again, nothing new: one store + {3 * steps:,} state rows",
        fmt_time(median(state_times)),
        "",
        spread(state_times),
        "",
        "< 100 ms",
        table.check(
            "no-change sync of a store with state rows < 100 ms", median(state_times) < 0.1
        ),
    )
    table.notes.append(
        f"{rounds} rounds, each into fresh databases; rows = runs + steps + checkpoint events + "
        f"outcomes ({rows['sync']:,} per sync, {rows['copy']:,} per COPY); both read the same "
        "SQLite files; sync also keeps its id maps and marks. 'Nothing new' per store is a "
        "whole sync call over the stores divided by their number; the state-rows store has a "
        "context event, a tool attempt and a staged turn per step, tables hashed whole each "
        "sync; its time is the store's own part of the call (the whole call, opening the "
        f"destination included, took {fmt_time(median(call_times))})"
    )
    return [table, copy_against_sync(cfg), trees(cfg)]


TREE_ROOTS = int(os.environ.get("HS_BENCH_TREE_ROOTS", "10000"))
"""Trees of ten runs in `run_trees`'s stores (10,000: 100,000 runs)."""


def run_trees(cfg: Config) -> list[Table]:
    """Table 10c alone, at `TREE_ROOTS` trees (quick: 200), two rounds (quick: one)."""
    if not cfg.pg:
        say("sync-trees: skipped (needs --pg)")
        return []
    return [trees(cfg, cfg.pick(TREE_ROOTS, 200), cfg.pick(2, 1))]
