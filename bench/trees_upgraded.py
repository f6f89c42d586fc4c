"""Benchmark 3b (part of `trees`): the tree aggregates on the large store of benchmark 3 as
io-harness 0.22 leaves it, then upgraded, beside the same rows in a new store.

The upgraded store: a copy of benchmark 3's store (made by the chain) taken down to 0.22, with
what io-harness never writes removed — every `hs_` index and the `alembic_version` stamp — so
that it is found as an untracked `io-harness 0.22 store`; then `migrate.upgrade` stamps it at
0.22 and runs the chain to the head, as `harness-store upgrade` would. Cached beside benchmark
3's store.

Candidate: each tree method of a `Store` on the upgraded store; baseline: the same method on
the new store; single calls alternated, every answer compared. Both have every `hs_`
index once upgraded, so the ratio should be 1 within noise: a store upgraded from a release
that never ran `hs1` answers as fast as a new one.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Config, Table, fmt_ratio, fmt_time, median, say
from .stores import copy_store, remove_store
from .trees import Forest, normalise, pooled

RELEASE = "0.22"
"""The release the store is taken down to: the real fixtures' oldest, and one whose stores
never run `hs1`."""

WITHIN_NOISE = (0.67, 1.5)
"""The ratio range read as "the same speed" on a shared machine."""


def own_indexes(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' "
            "AND name LIKE 'hs\\_%' ESCAPE '\\' ORDER BY name"
        ).fetchall()
        return [str(name) for (name,) in rows]
    finally:
        conn.close()


def as_io_harness_leaves(path: Path) -> list[str]:
    """Take the head store at `path` down to RELEASE and remove its stamp and `hs_` indexes;
    return the indexes removed."""
    from harness_store.schema import migrate

    migrate.downgrade(path, RELEASE, backup=False)
    dropped = own_indexes(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for name in dropped:
            conn.execute(f'DROP INDEX "{name}"')
        conn.execute("DROP TABLE alembic_version")
    finally:
        conn.close()
    return dropped


def upgraded_store(cfg: Config, forest: Forest) -> tuple[Path, dict[str, Any]]:
    """The cached upgraded store and the facts of how it was made (built when absent)."""
    from harness_store.schema import migrate

    stem = Path(forest.indexed).stem + f"-from-{RELEASE}"
    path = cfg.cache / f"{stem}.sqlite3"
    meta_path = cfg.cache / f"{stem}.json"
    if meta_path.exists() and path.exists():
        say(f"trees: reusing {path.name}")
        return path, json.loads(meta_path.read_text())
    building = cfg.cache / f"{stem}.building.sqlite3"
    remove_store(building)
    copy_store(Path(forest.indexed), building)
    say(f"trees: taking a copy down to io-harness {RELEASE}'s shape")
    dropped = as_io_harness_leaves(building)
    start = time.perf_counter()
    report = migrate.upgrade(building, backup=False)
    seconds = time.perf_counter() - start
    if report.stamped != RELEASE:
        raise AssertionError(f"the store was found as {report.found}, not {RELEASE}")
    remove_store(path)
    building.rename(path)
    meta = {
        "dropped": dropped,
        "found": report.found.describe() if report.found else "",
        "upgrade_seconds": round(seconds, 1),
        "own_indexes_after": own_indexes(path),
        "own_indexes_new": own_indexes(Path(forest.indexed)),
    }
    meta_path.write_text(json.dumps(meta, indent=1))
    return path, meta


def alternate(
    methods: list[str],
    roots: list[int],
    variants: dict[str, Callable[[str, int], Any]],
    calls: int,
) -> dict[str, dict[str, dict[int, list[float]]]]:
    """Per method, per variant, per root: the time of each single call, the variants called
    in turn (the first of each pair rotating) after one untimed call each; every answer is
    compared. Both sides are timed alike, one call at a time, so a preemption on the shared
    machine lands in a sample of either and the medians leave it out."""
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    names = list(variants)
    for method in methods:
        samples: dict[str, dict[int, list[float]]] = {n: {r: [] for r in roots} for n in names}
        for root in roots:
            answers = {n: variants[n](method, root) for n in names}
            if len({repr(a) for a in answers.values()}) != 1:
                raise AssertionError(f"{method}({root}) differs: {answers}")
            for i in range(calls):
                order = names[i % len(names) :] + names[: i % len(names)]
                for n in order:
                    start = time.perf_counter()
                    variants[n](method, root)
                    samples[n][root].append(time.perf_counter() - start)
        out[method] = samples
    return out


def upgraded_table(cfg: Config, forest: Forest, reps: int) -> Table:
    """Every tree method on the upgraded store beside the new store."""
    from harness_store import Store

    path, meta = upgraded_store(cfg, forest)
    calls = reps * cfg.pick(10, 5)
    methods = ["spent_tokens_tree", "agent_count_tree", "tree_run_ids", "tree"]
    new = Store.open(forest.indexed, upgrade=False)
    upgraded = Store.open(path, upgrade=False)

    def on(store: Any) -> Callable[[str, int], Any]:
        return lambda method, root: normalise(method, getattr(store, method)(root))

    say(f"trees: the upgraded store beside the new one, {len(methods)} methods")
    try:
        results = alternate(
            methods, forest.roots, {"new": on(new), "upgraded": on(upgraded)}, calls
        )
    finally:
        new.close()
        upgraded.close()
    table = Table(
        f"3b. Tree aggregates on a store io-harness {RELEASE} left, upgraded: "
        f"{forest.runs:,} runs / {forest.steps:,} steps, per call",
        ["method", "new store", f"upgraded from {RELEASE}", "upgraded / new", "within noise"],
    )
    low, high = WITHIN_NOISE
    for method, samples in results.items():
        ratio = median(
            [median(samples["upgraded"][r]) / median(samples["new"][r]) for r in forest.roots]
        )
        table.add(
            method,
            fmt_time(median(pooled(samples["new"]))),
            fmt_time(median(pooled(samples["upgraded"]))),
            fmt_ratio(ratio),
            table.check(f"upgraded {method} within {low}–{high}× of new", low <= ratio <= high),
        )
    same = meta["own_indexes_after"] == meta["own_indexes_new"]
    table.notes += [
        f"the upgraded store: benchmark 3's store taken down to {RELEASE}, its stamp and "
        f"{len(meta['dropped'])} hs_ indexes removed, found as `{meta['found']}`, stamped "
        f"there and upgraded to the head in {meta['upgrade_seconds']} s (cached)",
        "its hs_ indexes after the upgrade "
        + ("are the new store's" if same else f"differ: {meta['own_indexes_after']}"),
        f"{calls} calls per root and store, one at a time, the stores in turn; medians per "
        "call; upgraded / new = median over roots of (upgraded / new) per root; every answer "
        "checked equal to the new store's",
    ]
    return table
