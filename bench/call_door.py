"""The provider-call door's cost on the hot path: `record_provider_call`'s write before and
after it, side by side (one call of each in turn, into one store), on SQLite (a file store,
synchronous NORMAL) and PostgreSQL.

- `without`: the write as before the door (a plain INSERT, built each call as it was);
- `plain`: a plain INSERT built once, as the door's is: what the door's check alone costs is
  `door` against this;
- `door`: the write as it is (on PostgreSQL the run's hs6 row locked first, then the INSERT
  whose `total_tokens` reads the run's kept total of them, hs7's `hs_run_call_tokens`,
  `accounting.call_tokens_door`);
- `… deep`: the same into a run that already holds `DEEP` calls (before hs7 the door summed
  the run's calls on their index, so its cost grew with them; it now reads one row).

Every INSERT here, `without` and `plain` too, fires the store's triggers (hs3's, and hs7's).

Both go through the same Python (the method's checks and the prune hold), so the figures
differ by the statements only. Run: `python -m bench.call_door [--pg URL] [--n N]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, insert

from harness_store import Store
from harness_store import models as m
from harness_store.records import ProviderCall, Usage
from harness_store.store.accounting import CALL_COLUMNS, INSERT_CALL, LOCK_RUN_TOKENS
from harness_store.store.prune_guard import hold_run

from .common import alternating
from .token_door import pg_database

DEEPS = (1_000, 10_000)

CALL = ProviderCall(1, 0, "prov", "m1", Usage(10, 20, 30), 5, None, "stop", None)


def values(run: int) -> dict[str, Any]:
    u = CALL.usage
    assert u is not None
    return dict(
        run_id=run, step=1, attempt=0, provider="prov", model="m1",
        prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
        total_tokens=u.total_tokens, cache_read_tokens=0, cache_write_tokens=0,
        reasoning_tokens=0, server_tool_requests=0, latency_ms=5, ttft_ms=None,
        finish_reason="stop", failure=None,
    )  # fmt: skip


def without(store: Store, run: int) -> None:
    v = values(run)
    with store._write() as conn:
        hold_run(conn, store.backend, run)
        conn.execute(insert(m.ProviderCall).values(**v))


PLAIN = insert(m.table_of(m.ProviderCall)).values(
    {c: bindparam(c) for c in ("run_id", *CALL_COLUMNS)}
)


def plain(store: Store, run: int) -> None:
    v = values(run)
    with store._write() as conn:
        hold_run(conn, store.backend, run)
        conn.execute(PLAIN, v)


def door(store: Store, run: int) -> None:
    v = values(run)
    with store._write() as conn:
        hold_run(conn, store.backend, run)
        if not store.backend.one_connection:
            conn.execute(LOCK_RUN_TOKENS, {"run_id": run})
        conn.execute(INSERT_CALL, v)


def measure(target: str, n: int, label: str, **how: Any) -> None:
    with Store.open(target, **how) as store:
        fresh = {k: store.start_run(k, "f") for k in ("without", "plain", "door")}
        deep: dict[int, dict[str, int]] = {}
        for depth in DEEPS:
            deep[depth] = {}
            for k in ("plain", "door"):
                run = deep[depth][k] = store.start_run(f"{k} {depth}", "f")
                with store.transaction():
                    for _ in range(depth):
                        without(store, run)
        ops: list[tuple[str, Callable[[int], Any]]] = [
            ("without", lambda i: without(store, fresh["without"])),
            ("plain", lambda i: plain(store, fresh["plain"])),
            ("door", lambda i: door(store, fresh["door"])),
        ]
        for depth in DEEPS:
            ops += [
                (f"plain, {depth} deep", lambda i, r=deep[depth]["plain"]: plain(store, r)),
                (f"door, {depth} deep", lambda i, r=deep[depth]["door"]: door(store, r)),
            ]
        times = alternating(ops, n, max(n // 20, 1), warmup=100)
    print(f"\n{label}: µs per call written (median of windows), ratio to its `plain`")
    for name, windows in times.items():
        base = times[name.replace("door", "plain").replace("without", "plain")]
        ratios = [a / b for a, b in zip(windows, base, strict=True)]
        print(
            f"  {name:22} {statistics.median(windows) * 1e6:8.1f} µs   "
            f"x{statistics.median(ratios):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", default=None)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/h-door"))
    args = parser.parse_args()
    work = args.cache / "call_door"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        measure(str(work / "calls.sqlite3"), args.n, "SQLite (synchronous NORMAL)",
                synchronous="normal")  # fmt: skip
        if args.pg:
            with pg_database(args.pg) as url:
                measure(url, args.n, "PostgreSQL")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
