"""Benchmark 3: tree aggregates on a large store (full: 200,000 runs, 2,000,000 steps), on
SQLite (`trees`) and on PostgreSQL (6.3, part of `pg`): one body, run per backend.

The store: 20,000 agent trees of 10 runs each (a random recursive tree per root, depth ≤ 4),
10 steps per run. Trees run concurrently, as they do in a real store: runs are created in
groups of 50 trees whose run ids interleave, and the steps of a group's runs interleave too,
so a tree's rows are scattered over the file. On SQLite built with raw `sqlite3` `executemany`
in one transaction into a store made by the chain, then cached (with its index-less twin); on
PostgreSQL the same rows loaded by COPY into a scratch database, and its twin cloned from it.

Candidate: `Store.spent_tokens_tree` / `agent_count_tree` / `tree_run_ids` / `tree` on the store.
Baseline: upstream 0.13's SQL for tree_run_ids / spent_tokens_tree / agent_count_tree (the raw
driver) on the twin, with the hs_ indexes dropped — upstream's shape; for `tree` (no upstream
method) the Store's own query on the twin. For reference, also upstream's SQL run raw on the
indexed store (what the indexes alone buy, without the Store's Python layer).
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import Config, Table, fmt_ratio, fmt_time, median, prompt, say, tool_call
from .stores import (
    INSERT_STEP,
    POSTGRESQL,
    SQLITE,
    STEP_COLUMNS,
    Backend,
    copy_store,
    empty_head,
    pg_conninfo,
    pg_copy,
    pg_database,
    remove_store,
)

FORMAT = 1
"""Bump when the generated store changes, so a stale cache is rebuilt."""
PER_TREE = 10
STEPS_PER_RUN = 10
MAX_DEPTH = 4
CONCURRENT = 50
SEED = 6

SAMPLE_BUDGET = 0.1
"""Seconds a repeated sample may take."""
SLOW = 1.0
"""A call slower than this is timed once per root (see `measure`)."""
SPEED_TARGET = 100.0
TIME_TARGET = 2e-3

UPSTREAM_TREE = """WITH RECURSIVE tree(id) AS (
                 SELECT id FROM runs WHERE id = ?1
                 UNION ALL
                 SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id
             )"""
UPSTREAM_SQL = {
    "tree_run_ids": UPSTREAM_TREE + "\n             SELECT id FROM tree ORDER BY id ASC",
    "spent_tokens_tree": UPSTREAM_TREE
    + "\n             SELECT COALESCE(SUM(s.tokens), 0)"
    + "\n             FROM steps s JOIN tree ON s.run_id = tree.id",
    "agent_count_tree": UPSTREAM_TREE + "\n             SELECT COUNT(*) FROM tree",
}
"""Upstream 0.13's statements (state.rs), verbatim but for the placeholder style."""


# --- the store -------------------------------------------------------------------------------


def shapes(rng: random.Random, trees: int) -> list[list[tuple[int, int]]]:
    """Per tree, its nodes as (parent index or -1, depth), parents before children."""
    out = []
    for _ in range(trees):
        nodes = [(-1, 0)]
        for _ in range(PER_TREE - 1):
            open_nodes = [i for i, (_, d) in enumerate(nodes) if d < MAX_DEPTH]
            parent = rng.choice(open_nodes)
            nodes.append((parent, nodes[parent][1] + 1))
        out.append(nodes)
    return out


def generate(
    trees: int,
) -> tuple[list[tuple[Any, ...]], Callable[[], Iterator[tuple[Any, ...]]], list[int]]:
    """The runs rows, a generator of the steps rows, and the root ids."""
    rng = random.Random(SEED)
    forest = shapes(rng, trees)
    runs: list[tuple[Any, ...]] = []
    roots: list[int] = []
    groups: list[list[int]] = []  # run ids per group of concurrent trees
    next_id = 1
    for first in range(0, trees, CONCURRENT):
        members = list(range(first, min(first + CONCURRENT, trees)))
        order = [t for t in members for _ in range(PER_TREE)]
        rng.shuffle(order)
        made: dict[int, list[int]] = {t: [] for t in members}
        group_ids = []
        for t in order:
            index = len(made[t])
            parent, depth = forest[t][index]
            run_id = next_id
            next_id += 1
            parent_id = made[t][parent] if parent >= 0 else None
            if parent_id is None:
                roots.append(run_id)
            made[t].append(run_id)
            group_ids.append(run_id)
            runs.append(
                (
                    run_id,
                    f"agent task {t}.{index}: fix the failing parser test",
                    f"src/module_{t % 97}.rs",
                    "success",
                    "anthropic",
                    parent_id,
                    depth,
                    "completed",
                    "2025-06-01T12:00:00.000Z",
                )
            )
        groups.append(group_ids)

    def steps() -> Iterator[tuple[Any, ...]]:
        step_rng = random.Random(SEED + 1)
        for group_ids in groups:
            order = [r for r in group_ids for _ in range(STEPS_PER_RUN)]
            step_rng.shuffle(order)
            counters: dict[int, int] = {}
            for run_id in order:
                n = counters.get(run_id, 0) + 1
                counters[run_id] = n
                yield (
                    run_id,
                    n,
                    "tool",
                    f"ok: edited (run {run_id} step {n})",
                    prompt(n),
                    tool_call(n),
                    200 + (run_id * 7919 + n * 104729) % 4000,
                )

    return runs, steps, roots


RUN_COLUMNS = "runs (id, goal, file, outcome, provider, parent_run_id, depth, status, started_at)"
RUN_INSERT = f"INSERT INTO {RUN_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"


@dataclass
class Forest:
    """The generated trees loaded into one backend: the store and its index-less twin."""

    indexed: Any
    """The store as the chain builds it (a path or a URL)."""
    twin: Any
    """The same rows with the hs_ indexes dropped: upstream's shape."""
    runs: int
    steps: int
    roots: list[int]
    """The roots queried: five spread over the store."""
    notes: list[str]
    """How the store was built, for the table."""


def sample_roots(roots: list[int]) -> list[int]:
    return [roots[int(i * (len(roots) - 1) / 4)] for i in range(5)]


def sqlite_forest(cfg: Config, trees: int) -> Forest:
    """The cached store and its index-less twin (built when absent or stale)."""
    stem = f"trees-{trees}x{PER_TREE}x{STEPS_PER_RUN}-v{FORMAT}"
    indexed = cfg.cache / f"{stem}.sqlite3"
    upstream = cfg.cache / f"{stem}-upstream.sqlite3"
    meta_path = cfg.cache / f"{stem}.json"
    if meta_path.exists() and indexed.exists() and upstream.exists():
        meta = json.loads(meta_path.read_text())
        say(f"trees: reusing {indexed.name} ({meta['runs']:,} runs, {meta['steps']:,} steps)")
    else:
        meta = build_sqlite(cfg, trees, stem, indexed, upstream)
        meta_path.write_text(json.dumps(meta, indent=1))
    return Forest(
        indexed,
        upstream,
        meta["runs"],
        meta["steps"],
        meta["sample_roots"],
        [
            f"{meta['roots']:,} trees of {PER_TREE} runs (random shape, depth ≤ {MAX_DEPTH}), "
            f"{STEPS_PER_RUN} steps per run, {CONCURRENT} trees interleaved at a time; file "
            f"{meta['file_bytes'] / 2**30:.2f} GiB, built in {meta['build_seconds']} s (cached)",
            f"upstream copy: indexes dropped: {', '.join(meta['dropped_in_upstream_copy'])}",
        ],
    )


def build_sqlite(cfg: Config, trees: int, stem: str, indexed: Path, upstream: Path) -> Any:
    """Fill a chain-built store by `executemany` in one transaction, copy it without the hs_
    indexes; return the facts kept beside them."""
    building = cfg.cache / f"{stem}.building.sqlite3"
    remove_store(building)
    copy_store(empty_head(cfg), building)
    say(f"trees: building {trees * PER_TREE:,} runs / {trees * PER_TREE * STEPS_PER_RUN:,} steps")
    start = time.perf_counter()
    runs, steps, roots = generate(trees)
    conn = sqlite3.connect(building, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")  # one big transaction: no WAL detour
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
        "AND tbl_name IN ('runs', 'steps') "
        "AND sql IS NOT NULL"
    ).fetchall()
    conn.execute("BEGIN")
    for name, _ in indexes:  # built after the rows: one sort instead of 2M random inserts
        conn.execute(f'DROP INDEX "{name}"')
    conn.executemany(RUN_INSERT, runs)
    conn.executemany(INSERT_STEP, steps())
    for _, sql in indexes:
        conn.execute(sql)
    conn.execute("COMMIT")
    n_runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    n_steps = conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    built = time.perf_counter() - start
    remove_store(indexed)
    building.rename(indexed)
    say(f"trees: built in {built:.1f} s; making the index-less copy")
    remove_store(upstream)
    copy_store(indexed, upstream)
    conn = sqlite3.connect(upstream, isolation_level=None)
    dropped = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'hs\\_%' ESCAPE '\\'"
        ).fetchall()
    ]
    for name in dropped:
        conn.execute(f'DROP INDEX "{name}"')
    conn.close()
    return {
        "format": FORMAT,
        "runs": n_runs,
        "steps": n_steps,
        "roots": len(roots),
        "sample_roots": sample_roots(roots),
        "build_seconds": round(built, 1),
        "file_bytes": indexed.stat().st_size,
        "dropped_in_upstream_copy": dropped,
    }


@contextmanager
def postgresql_forest(cfg: Config, server: str, name: str, trees: int) -> Iterator[Forest]:
    """The same trees in a scratch database filled by COPY, and its index-less twin cloned
    from it; both dropped afterwards."""
    import psycopg

    from harness_store import Store

    runs, steps, roots = generate(trees)
    with pg_database(server, name) as url:
        Store.open(url).close()  # the chain builds the schema
        say(
            f"PostgreSQL trees: loading {len(runs):,} runs / "
            f"{len(runs) * STEPS_PER_RUN:,} steps by COPY"
        )
        start = time.perf_counter()
        with psycopg.connect(pg_conninfo(url)) as conn:
            indexes = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('runs', 'steps') "
                "AND indexname LIKE 'hs\\_%'"
            ).fetchall()
            for index, _ in indexes:
                conn.execute(f'DROP INDEX "{index}"')
            with conn.cursor() as cursor:
                pg_copy(cursor, RUN_COLUMNS, runs)
                pg_copy(cursor, STEP_COLUMNS, steps())
            for _, sql in indexes:
                conn.execute(sql)
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('runs', 'id'), (SELECT MAX(id) FROM runs))"
            )
            conn.commit()
            conn.autocommit = True
            conn.execute("VACUUM ANALYZE runs")
            conn.execute("VACUUM ANALYZE steps")
        built = time.perf_counter() - start
        say(f"PostgreSQL trees: loaded in {built:.1f} s; cloning the index-less twin")
        with pg_database(server, name + "_up", template=name) as up_url:
            with psycopg.connect(pg_conninfo(up_url), autocommit=True) as conn:
                dropped = [
                    n
                    for (n,) in conn.execute(
                        "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'hs\\_%' "
                        "AND indexname NOT IN (SELECT conname FROM pg_constraint)"
                    ).fetchall()
                ]
                for index in dropped:
                    conn.execute(f'DROP INDEX "{index}"')
                conn.execute("ANALYZE")
            yield Forest(
                url,
                up_url,
                len(runs),
                len(runs) * STEPS_PER_RUN,
                sample_roots(roots),
                [
                    f"same generated trees as the SQLite store; loaded by COPY in {built:.1f} s, "
                    "VACUUM ANALYZEd; twin database cloned from it (TEMPLATE) with "
                    f"{', '.join(dropped)} dropped, ANALYZEd"
                ],
            )


# --- the measurement -------------------------------------------------------------------------


def measure(
    methods: list[str],
    roots: list[int],
    candidate: Callable[[str, int], Any],
    baseline: Callable[[str, int], Any],
    reference: Callable[[str, int], Any] | None,
    reps: int,
    rounds: int,
) -> dict[str, dict[str, dict[int, list[float]]]]:
    """Per method, per variant, per root: per-call times. Variants run interleaved per root and
    per round (order rotated), after a warm-up round; every answer is compared.

    A fast call is repeated (up to `reps` times, within SAMPLE_BUDGET) after one untimed call.
    A slow call (over SLOW seconds — the index-less baselines) is timed once per root, in the
    warm-up round, and not run again: its cost is a scan of the store, not a cache effect."""
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    mismatches: list[str] = []
    for method in methods:
        samples: dict[str, dict[int, list[float]]] = {
            k: {root: [] for root in roots} for k in ("candidate", "baseline", "reference")
        }
        slow: set[tuple[str, int]] = set()
        for r in range(rounds + 1):
            for i, root in enumerate(roots):
                variants: list[tuple[str, Callable[[str, int], Any], int]] = [
                    ("candidate", candidate, reps),
                    ("baseline", baseline, 1),
                ]
                if reference is not None and method in UPSTREAM_SQL:
                    variants.append(("reference", reference, reps))
                k = (r + i) % len(variants)
                answers = {}
                for name, fn, n in variants[k:] + variants[:k]:
                    if (name, root) in slow:
                        continue
                    start = time.perf_counter()
                    answer = fn(method, root)
                    first = time.perf_counter() - start
                    answers[name] = answer
                    if first > SLOW and r == 0:
                        slow.add((name, root))
                        samples[name][root].append(first)
                        continue
                    n = max(1, min(n, int(SAMPLE_BUDGET / max(first, 1e-9))))
                    start = time.perf_counter()
                    for _ in range(n):
                        answer = fn(method, root)
                    elapsed = (time.perf_counter() - start) / n
                    if r > 0:
                        samples[name][root].append(elapsed)
                if len({repr(a) for a in answers.values()}) != 1:
                    mismatches.append(f"{method}({root}): {answers}")
        out[method] = samples
    if mismatches:
        raise AssertionError("candidate and baseline disagree: " + "; ".join(mismatches[:3]))
    return out


def per_root_speedup(baseline: dict[int, list[float]], candidate: dict[int, list[float]]) -> float:
    """Median over roots of (baseline median / candidate median) for that root."""
    return median([median(baseline[r]) / median(candidate[r]) for r in candidate if candidate[r]])


def pooled(samples: dict[int, list[float]]) -> list[float]:
    return [t for times in samples.values() for t in times]


def normalise(method: str, value: Any) -> Any:
    if method == "tree":
        return [(n.run_id, n.parent_run_id, n.depth, n.steps, n.tokens) for n in value]
    if method == "tree_run_ids":
        return [int(v) for v in value]
    return int(value)


def tabulate(
    table: Table,
    results: dict[str, dict[str, dict[int, list[float]]]],
    backend: str,
    baseline_label: str,
) -> None:
    for method, samples in results.items():
        c, b, ref = (pooled(samples[k]) for k in ("candidate", "baseline", "reference"))
        ratio = per_root_speedup(samples["baseline"], samples["candidate"])
        fast = median(c) < TIME_TARGET
        table.add(
            f"{method}",
            fmt_time(median(c)),
            fmt_time(median(ref)) if ref else "—",
            fmt_time(median(b)),
            baseline_label if method in UPSTREAM_SQL else "Store's query, no hs_ indexes",
            fmt_ratio(ratio),
            table.check(
                f"{backend} {method} ≥ {SPEED_TARGET:.0f}× upstream shape", ratio >= SPEED_TARGET
            ),
            table.check(f"{backend} {method} < 2 ms", fast),
        )


COLUMNS = [
    "method",
    "Store (indexed)",
    "upstream SQL raw (indexed)",
    "baseline",
    "baseline is",
    "speedup",
    "≥ 100×",
    "< 2 ms",
]


def tree_table(cfg: Config, backend: Backend, number: str, forest: Forest, reps: int) -> Table:
    """Every tree method on `forest`: the Store beside upstream's SQL, raw, on the index-less
    twin (for `tree`, the Store's own query there) and on the indexed store."""
    from harness_store import Store

    rounds = cfg.pick(3, 2)
    methods = ["spent_tokens_tree", "agent_count_tree", "tree_run_ids", "tree"]
    statements = {method: backend.sql(sql) for method, sql in UPSTREAM_SQL.items()}
    store = Store.open(forest.indexed, upgrade=False)
    plain = Store.open(forest.twin, upgrade=False)  # at head by its stamp, without the indexes
    up = backend.connect(forest.twin, True)
    ref = backend.connect(forest.indexed, True)

    def candidate(method: str, root: int) -> Any:
        return normalise(method, getattr(store, method)(root))

    def raw(conn: Any, method: str, root: int) -> Any:
        rows = conn.execute(statements[method], (root,)).fetchall()
        return normalise(method, [r[0] for r in rows] if method == "tree_run_ids" else rows[0][0])

    def baseline(method: str, root: int) -> Any:
        if method in UPSTREAM_SQL:
            return raw(up, method, root)
        return normalise(method, getattr(plain, method)(root))

    say(
        f"{backend.name} trees: {len(methods)} methods × {len(forest.roots)} roots × "
        f"{rounds}+1 rounds ({reps} calls per candidate sample)"
    )
    try:
        results = measure(
            methods, forest.roots, candidate, baseline, lambda m, r: raw(ref, m, r), reps, rounds
        )
    finally:
        store.close()
        plain.close()
        up.close()
        ref.close()
    table = Table(
        f"{number} Tree aggregates, {backend.name}: {forest.runs:,} runs / "
        f"{forest.steps:,} steps, per call",
        COLUMNS,
    )
    tabulate(table, results, backend.name, "upstream SQL, no hs_ indexes")
    if cfg.quick:
        table.notes.append(
            "quick mode: a store 10× smaller than the targets assume — the "
            "baseline's scans shrink with it, so the speedup verdicts mean little here"
        )
    table.notes += [
        *forest.notes[:1],
        f"roots queried: {forest.roots}; {rounds} rounds × {len(forest.roots)} roots per method; "
        "medians per call; "
        "speedup = median over roots of (baseline / candidate) per root; baselines slower than "
        f"{SLOW:g} s timed once per root; every answer checked equal to the baseline's",
        *forest.notes[1:],
    ]
    return table


def run(cfg: Config) -> list[Table]:
    """Benchmark 3, on SQLite, and 3b: the same store as io-harness 0.22 leaves it, upgraded."""
    from .trees_upgraded import upgraded_table

    forest = sqlite_forest(cfg, cfg.pick(20_000, 2_000))
    reps = cfg.pick(50, 20)
    return [tree_table(cfg, SQLITE, "3.", forest, reps=reps), upgraded_table(cfg, forest, reps)]


def run_pg(cfg: Config, server: str, name: str) -> list[Table]:
    """Benchmark 3 on PostgreSQL (6.3, part of `pg`)."""
    with postgresql_forest(cfg, server, name, cfg.pick(20_000, 2_000)) as forest:
        return [tree_table(cfg, POSTGRESQL, "6.3", forest, reps=cfg.pick(30, 10))]
