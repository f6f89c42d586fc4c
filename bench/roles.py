"""Benchmark 18: a sync pass as a follower role against the same pass as the centre's owner.

A follower's rows pass row-level security: every row it writes is checked against the role
its run belongs to (an index lookup in `hs_sync_row_roles`), and its bulk rows go through a
temporary table and one INSERT … SELECT, as COPY FROM refuses a table under row-level
security. The same stores are synced into two fresh databases in the same round, one as the
owner, one as a follower role: a first pass (every row new) and a pass after a few steps were
added to every store (what a follower sends most of the time). Target: the follower's pass
≥ 0.8× the owner's speed (its rows/s over the owner's).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .common import Config, Table, fmt_ratio, fmt_time, median, say, spread, step_records
from .stores import copy_store, drop_role, pg_database
from .sync import template

TARGET = 0.8


def _grow(sources: list[Path], at: int) -> None:
    """A few more steps in the first run of every store: the next pass's work."""
    from harness_store import Store

    for path in sources:
        with Store.open(path, synchronous="off", backup=False) as store:
            store.checkpoint_steps(1, step_records(at, 20))


def run(cfg: Config) -> list[Table]:
    from sqlalchemy.engine import make_url

    from harness_store import Store
    from harness_store.sync import sync
    from harness_store.sync.roles import grant

    if not cfg.pg:
        say("roles: skipped (needs --pg)")
        return []
    stores = cfg.pick(10, 3)
    steps = cfg.pick(10_000, 2_000)
    rounds = cfg.pick(3, 2)
    base = template(cfg, steps)
    role = f"hs_bench_follower_{os.getpid()}"
    table = Table(
        f"18. a sync pass of {stores} stores × {steps:,} steps: follower role against owner",
        ["pass", "owner", "follower", "noise", "follower speed vs owner", "target", "result"],
    )
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for round_ in range(rounds):
            say(f"roles: round {round_ + 1}/{rounds}")
            order = ("owner", "follower") if round_ % 2 == 0 else ("follower", "owner")
            for who in order:  # each goes first in turn: neither has the warmer caches
                sources = [
                    copy_store(base, cfg.work / f"roles-{who}-{n}.sqlite3") for n in range(stores)
                ]
                with pg_database(cfg.pg, f"hs_bench_roles_{who}") as url:
                    Store.open(url).close()  # the chain's schema, outside the timing
                    sync([], url)
                    dest = url
                    if who == "follower":
                        grant(url.render_as_string(hide_password=False), role, "follower")
                        dest = make_url(url).set(username=role, password=None)
                    start = time.perf_counter()
                    sync(sources, dest)
                    times.setdefault(("first", who), []).append(time.perf_counter() - start)
                    _grow(sources, steps // 10 + 1)
                    start = time.perf_counter()
                    again = sync(sources, dest)
                    times.setdefault(("grown", who), []).append(time.perf_counter() - start)
                    assert again.rows > 0
                for path in sources:
                    path.unlink()
    finally:
        drop_role(cfg.pg, role)
    for name in ("first", "grown"):
        owner, follower = times[(name, "owner")], times[(name, "follower")]
        ratio = median([o / f for o, f in zip(owner, follower, strict=True)])
        verdict = table.check(f"{name} pass as a follower ≥ {TARGET}× the owner's", ratio >= TARGET)
        table.add(
            name,
            fmt_time(median(owner)),
            fmt_time(median(follower)),
            f"{spread(owner)} / {spread(follower)}",
            fmt_ratio(ratio),
            f"≥ {TARGET}×",
            verdict,
        )
    table.notes.append(
        "each round syncs fresh copies of the same stores into two fresh databases, one as the "
        "owner and one as a follower role, each going first in turn; the ratio is the median "
        "of the rounds' ratios"
    )
    return [table]
