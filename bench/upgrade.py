"""Benchmark 4: upgrading a 0.1 store to head (`harness_store.migrate.upgrade`).

Two 0.1 stores, built as io-harness 0.1 leaves them (tests/legacy.py `open_as(conn, "0.1")`,
rollback journal, no indexes) and then bulk-filled: 10,000 and 1,000,000 steps, 10 per run.
Each measured upgrade runs on a fresh copy (the copy is not timed), in this process, after a
discarded warm-up round (so Alembic's and the chain's imports are not counted — the fixed cost
measured is the smallest one, which makes the 1M/10k ratio the strictest). Timed with
backup=False (the target) and separately with backup=True (the online-backup copy is O(size)).
For reference: the same upgrade stopped at 0.13 (the chain without hs1's indexes), and a raw
`CREATE INDEX` of hs1's steps index on the same 1M-step copy.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from .common import (
    Config,
    Table,
    copy_store,
    fmt_ratio,
    fmt_time,
    interleaved,
    median,
    remove_store,
    say,
    spread,
)

FORMAT = 1
STEPS_PER_RUN = 10
RATIO_TARGET = 3.0
RESULT = (
    "ok: ran `cargo test -p parser` — 41 passed, 1 failed (tests::parser::parses_empty_input); "
    "the failure is an unwrap on an empty token stream at src/parser.rs:142 (step {n})"
)


def build_v01(cfg: Config, steps: int) -> Path:
    """A cached 0.1 store with `steps` steps (`steps / 10` runs)."""
    import legacy  # tests/legacy.py

    path = cfg.cache / f"v0.1-{steps}-v{FORMAT}.sqlite3"
    if path.exists():
        return path
    building = path.with_suffix(".building")
    remove_store(building)
    say(f"upgrade: building a 0.1 store with {steps:,} steps")
    conn = sqlite3.connect(building, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    legacy.open_as(conn, "0.1", file=True)
    runs = steps // STEPS_PER_RUN
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO runs (goal, file, outcome) VALUES (?, ?, ?)",
        (
            (f"fix the failing parser test #{i}", f"src/module_{i % 97}.rs", "success")
            for i in range(runs)
        ),
    )
    conn.executemany(
        "INSERT INTO steps (run_id, step, decision, result) VALUES (?, ?, ?, ?)",
        (
            (1 + i // STEPS_PER_RUN, 1 + i % STEPS_PER_RUN, "tool", RESULT.format(n=i))
            for i in range(steps)
        ),
    )
    conn.execute("COMMIT")
    conn.close()
    building.rename(path)
    return path


def run(cfg: Config) -> list[Table]:
    from harness_store.migrate import upgrade

    sizes = cfg.pick((10_000, 1_000_000), (10_000, 100_000))
    small, large = sizes
    templates = {n: build_v01(cfg, n) for n in sizes}
    rounds = cfg.pick(3, 2)
    table = Table(
        "4. Upgrade 0.1 → head (migrate.upgrade), per store",
        ["steps", "backup", "median", "noise", "file", f"vs {small:,}", "target", "result"],
    )
    counter = iter(range(10**6))

    def variant(n: int, backup: bool, revision: str = "head") -> Any:
        def block() -> float:
            path = copy_store(templates[n], cfg.work / f"upgrade-{n}-{next(counter)}.sqlite3")
            start = time.perf_counter()
            report = upgrade(path, revision, backup=backup)
            elapsed = time.perf_counter() - start
            if report.after != ("hs1" if revision == "head" else revision):
                raise AssertionError(f"upgrade ended at {report.after}")
            remove_store(path)
            if report.backup is not None:
                Path(report.backup).unlink()
            return elapsed

        return block

    results: dict[tuple[int, bool], list[float]] = {}
    for backup in (False, True):
        say(f"upgrade: backup={backup}, {rounds}+1 rounds × {len(sizes)} stores")
        got = interleaved([(str(n), variant(n, backup)) for n in sizes], rounds)
        for n in sizes:
            results[(n, backup)] = got[str(n)]

    say(f"upgrade: to 0.13 only (the chain without hs1's indexes), {rounds}+1 rounds")
    got = interleaved([(str(n), variant(n, False, "0.13")) for n in sizes], rounds)
    chain = {n: got[str(n)] for n in sizes}

    for backup in (False, True):
        base = results[(small, backup)]
        for n in sizes:
            times = results[(n, backup)]
            ratio = median(t / b for t, b in zip(times, base, strict=True))
            size = templates[n].stat().st_size / 2**20
            if n == large and not backup:
                target, verdict = (
                    f"≤ {RATIO_TARGET:.0f}× {small:,}",
                    table.check(
                        f"upgrade 0.1→head of {large:,} steps ≤ {RATIO_TARGET:.0f}× "
                        f"that of {small:,}",
                        ratio <= RATIO_TARGET,
                    ),
                )
            else:
                target, verdict = "", ""
            table.add(
                f"{n:,}",
                "yes" if backup else "no",
                fmt_time(median(times)),
                spread(times),
                f"{size:,.0f} MiB",
                fmt_ratio(ratio),
                target,
                verdict,
            )

    for n in sizes:
        times = chain[n]
        ratio = median(t / b for t, b in zip(times, chain[small], strict=True))
        table.add(
            f"{n:,}",
            "no — to 0.13 only (no hs1 indexes)",
            fmt_time(median(times)),
            spread(times),
            "",
            fmt_ratio(ratio),
            "",
            "",
        )

    say("upgrade: reference timings of the index build alone")
    index_times = []
    for _ in range(rounds):
        path = copy_store(templates[large], cfg.work / "upgrade-index.sqlite3")
        conn = sqlite3.connect(path, isolation_level=None)
        start = time.perf_counter()
        conn.execute("CREATE INDEX hs_steps_run_id_step ON steps (run_id, step)")
        index_times.append(time.perf_counter() - start)
        conn.close()
        remove_store(path)
    table.add(
        f"{large:,}",
        "(raw CREATE INDEX steps(run_id, step) only)",
        fmt_time(median(index_times)),
        spread(index_times),
        "",
        "",
        "",
        "",
    )
    table.notes += [
        f"0.1 stores: {STEPS_PER_RUN} steps per run, result ~200 B, rollback journal; each "
        f"upgrade on a fresh copy; {rounds} rounds after a warm-up, sizes interleaved",
        "ratio = median over rounds of (time / time of the small store in the same round)",
    ]
    return [table]
