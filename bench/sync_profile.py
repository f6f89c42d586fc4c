"""Benchmark 10d: where the time of a `sync` into PostgreSQL goes, against psycopg `COPY` of
the same rows (table 10c's stores: `HS_BENCH_TREE_ROOTS` trees of ten runs, and as many root
runs).

Each variant runs once into a fresh database with the client profiled (cProfile) and the
server's backends of that database watched (their CPU from /proc, sampled every 50 ms while
they live, so the server must be on this machine), then once more through a counting proxy
(`tests/support/pg_proxy.py`) for the messages the client sent: statements (simple queries
and Executes), round trips (Syncs and simple queries), `COPY` data messages. The proxy run is
not timed. The notes list the functions with the most time of their own and the package's
functions with the most time under them.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from .common import Config, Table, fmt_time, say
from .follow import cpu_seconds
from .stores import pg_conninfo, pg_database
from .sync import TREE_ROOTS, tree_copy_baseline, tree_store

TOP = 12
DUMP = os.environ.get("HS_BENCH_PROFILE_DIR")
"""A directory to write each profile to (`pstats` files), or None."""
SHAPES = os.environ.get("HS_BENCH_PROFILE_SHAPES", "trees,roots")
"""Which stores to profile: `trees`, `roots` or both (comma-separated)."""
COUNT = os.environ.get("HS_BENCH_PROFILE_COUNT", "1") != "0"
"""Whether to count the messages in a second run (0: not)."""


class Backends:
    """The CPU seconds of the server's backends serving database `name`, while it runs."""

    def __init__(self, admin: str, name: str) -> None:
        self.admin, self.name = admin, name
        self.cpu: dict[int, float] = {}
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            while True:
                pids = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.name,)
                ).fetchall()
                for (pid,) in pids:
                    with suppress(OSError):  # gone since the query
                        self.cpu[pid] = cpu_seconds(pid)
                if self.halt.wait(0.05):
                    return

    def total(self) -> float:
        self.halt.set()
        self.thread.join(10)
        return sum(self.cpu.values())


def stat_database(conninfo: str, name: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, tup_fetched "
            "FROM pg_stat_database WHERE datname = %s",
            (name,),
        ).fetchone()
    assert row is not None
    return dict(zip(("commits", "inserted", "updated", "deleted", "fetched"), row, strict=True))


def top(profile: cProfile.Profile, key: str, only: str | None = None) -> list[str]:
    """The `TOP` functions by `key` ("tottime" or "cumulative"), those under `only` alone."""
    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    rows = []
    for (path, line, func), (_, calls, own, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if only is not None and only not in path:
            continue
        rows.append((own if key == "tottime" else cum, own, cum, calls, path, line, func))
    rows.sort(reverse=True)
    out = []
    for _, own, cum, calls, path, line, func in rows[:TOP]:
        where = path.split("harness_store/")[-1] if "harness_store/" in path else Path(path).name
        out.append(
            f"{func} ({where}:{line}): own {own:.2f} s, under it {cum:.2f} s, {calls:,} calls"
        )
    return out


def variant_once(
    cfg: Config, name: str, work: Callable[[Any], Any], profiled: bool
) -> tuple[float, float, float, dict[str, int], cProfile.Profile | None]:
    """`work(url)` into a fresh database: wall, client CPU, server CPU, the database's counters,
    the profile."""
    from harness_store import Store
    from harness_store.sync import sync

    assert cfg.pg is not None
    with pg_database(cfg.pg, name) as url:
        Store.open(url).close()
        sync([], url)  # the centre's own tables, outside the timing
        conninfo = pg_conninfo(url)
        before = stat_database(conninfo, name)
        backends = Backends(conninfo, name)
        # the client's CPU, not its wall time: on a loaded machine every function's wall
        # time swells alike with the waits for a CPU
        profile = cProfile.Profile(time.process_time) if profiled else None
        cpu, start = time.process_time(), time.perf_counter()
        if profile is not None:
            profile.enable()
        work(url)
        if profile is not None:
            profile.disable()
        wall, client = time.perf_counter() - start, time.process_time() - cpu
        time.sleep(0.2)
        server = backends.total()
        after = stat_database(conninfo, name)
    return wall, client, server, {k: after[k] - before[k] for k in after}, profile


def counted(cfg: Config, name: str, work: Callable[[str], Any]) -> dict[str, int]:
    """The messages `work(url)` sends through the counting proxy into a fresh database."""
    from support.pg_proxy import PgProxy

    from harness_store import Store
    from harness_store.sync import sync

    assert cfg.pg is not None
    with pg_database(cfg.pg, name) as url:
        Store.open(url).close()
        sync([], url)
        proxy = PgProxy(url.render_as_string(hide_password=False))
        try:
            with proxy.counting() as messages, by_statement() as shapes:
                work(proxy.url)
            return shapes | {
                "statements": proxy.statements(messages),
                "round trips": messages[b"S"] + messages[b"Q"],
                "COPY data": messages[b"d"],
                "Parse": messages[b"P"],
            }
        finally:
            proxy.close()


@contextmanager
def by_statement() -> Iterator[dict[str, int]]:
    """SQLAlchemy's executions during the body, by the statement's first words (an
    executemany counted once a row, as psycopg sends it: an Execute a row)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: Counter[str] = Counter()

    def count(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        words = " ".join(statement.split()[:4])[:60]
        seen[words] += len(params) if many else 1

    event.listen(Engine, "before_cursor_execute", count)
    out: dict[str, int] = {}
    try:
        yield out
    finally:
        event.remove(Engine, "before_cursor_execute", count)
        out.update({f"sql: {k}": v for k, v in seen.most_common(8)})


def run(cfg: Config) -> list[Table]:
    from harness_store.sync import sync

    if not cfg.pg:
        say("sync-profile: skipped (needs --pg)")
        return []
    roots = cfg.pick(TREE_ROOTS, 200)
    shapes = {
        label: shape
        for label, shape, name in (
            (f"{roots:,} trees of 10 runs", (roots, 9), "trees"),
            (f"{roots * 10:,} root runs", (roots * 10, 0), "roots"),
        )
        if name in SHAPES.split(",")
    }
    table = Table(
        "10d. where a sync's time goes, beside psycopg COPY of the same rows (one run each, "
        "profiled; messages counted in a second run through a proxy)",
        ["store", "variant", "wall", "client CPU", "server CPU", "statements", "round trips",
         "COPY data messages", "rows inserted / updated on the server", "load (1 min)"],
    )  # fmt: skip
    pid = os.getpid()
    for label, (tops, below) in shapes.items():
        source = tree_store(cfg, tops, below, 3)
        for variant, work in (
            ("harness_store.sync", lambda url, s=source: sync([s], url)),
            ("psycopg COPY", lambda url, s=source: tree_copy_baseline(s, url)),
        ):
            tag = "sync" if variant.startswith("harness") else "copy"
            say(f"sync-profile: {label}, {variant}")
            wall, client, server, stats, profile = variant_once(
                cfg, f"hs_bench_profile_{tag}_{pid}", work, profiled=tag == "sync"
            )
            sent = counted(cfg, f"hs_bench_count_{tag}_{pid}", work) if COUNT else {}
            if profile is not None and DUMP:
                profile.dump_stats(Path(DUMP) / f"sync-{tops}-{below}.pstats")
            table.add(
                label, variant, fmt_time(wall), fmt_time(client), fmt_time(server),
                f"{sent.get('statements', 0):,}", f"{sent.get('round trips', 0):,}",
                f"{sent.get('COPY data', 0):,}",
                f"{stats['inserted']:,} / {stats['updated']:,}", f"{os.getloadavg()[0]:.1f}",
            )  # fmt: skip
            table.notes.append(
                f"{label}, {variant}, SQLAlchemy executions by statement (most first): "
                + "; ".join(f"{k[5:]} ×{v:,}" for k, v in sent.items() if k.startswith("sql: "))
            )
            if profile is not None:
                table.notes.append(
                    f"{label}, most time of their own: " + "; ".join(top(profile, "tottime"))
                )
                table.notes.append(
                    f"{label}, the package's functions with most time under them: "
                    + "; ".join(top(profile, "cumulative", only="harness_store/"))
                )
    table.notes.append(
        "client CPU: the benchmark process's (cProfile on for sync, timing CPU, which slows "
        "its Python); "
        "server CPU: the backends serving the database, sampled every 50 ms from /proc"
    )
    return [table]
