"""The token door's cost on the hot path: `Store.checkpoint_step` with and without it, side by
side (one call of each in turn), on SQLite (a file store, synchronous NORMAL) and PostgreSQL.

- `without`: the Store's checkpoint statements with a plain `tokens` (as before hs6), on a
  store without hs6's table and triggers: what a checkpoint cost before;
- `door`: the Store as it is: hs6's triggers keeping the run's total, and the INSERT reading
  it (`checkpoints.tokens_door`);
- `door, deep run`: the same into a run that already holds `DEEP` steps (the door's probe is
  one index lookup, so it should cost what a fresh run's does).

Run: `python -m bench.token_door [--pg URL] [--n N]`. Scratch stores go to
`/work/cache/h-values` (or `--cache`); PostgreSQL databases are created and dropped.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from harness_store import Store
from harness_store.connector.driver import DriverStatement
from harness_store.models.run_tokens import RUN_TOKENS
from harness_store.store.checkpoints import INSERT_CHECKPOINT, STEP_COLUMNS

from .common import alternating, step_record, step_records

DEEP = 200_000


def plain(store: Store) -> None:
    """Make `store` write steps as before the door: plain INSERTs, and no hs6 table or
    triggers in its database."""
    from sqlalchemy import bindparam, insert

    from harness_store import models as m

    backend = store.backend
    with store.write_engine.begin() as conn:
        for statement in backend.drop_run_tokens_triggers_sql():
            conn.exec_driver_sql(statement)
        conn.exec_driver_sql(f"DROP TABLE {RUN_TOKENS.name}")
    insert_step = insert(m.table_of(m.Step)).values({c: bindparam(c) for c in STEP_COLUMNS})
    path = store._checkpoints
    path._checkpoint_writes = [
        DriverStatement.compile(s, store.engine)
        for s in backend.checkpoint_writes(insert_step, INSERT_CHECKPOINT)
    ]


@contextmanager
def pg_database(server: str) -> Iterator[str]:
    name = f"bench_hv_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


def measure(targets: dict[str, str], n: int, label: str, **how: Any) -> None:
    with ExitStack() as stack:
        stores = {k: stack.enter_context(Store.open(t, **how)) for k, t in targets.items()}
        plain(stores["without"])
        runs = {k: s.start_run("bench", "f") for k, s in stores.items()}
        deep = stores["door"].start_run("deep", "f")
        stores["door"].checkpoint_steps(deep, step_records(0, DEEP))
        old, new = stores["without"], stores["door"]
        ops: list[tuple[str, Callable[[int], Any]]] = [
            ("without", lambda i: old.checkpoint_step(runs["without"], step_record(i))),
            ("door", lambda i: new.checkpoint_step(runs["door"], step_record(i))),
            ("door, deep run", lambda i: new.checkpoint_step(deep, step_record(DEEP + i))),
        ]
        times = alternating(ops, n, max(n // 20, 1), warmup=200)
    base = times["without"]
    print(f"\n{label}: µs per checkpoint_step (median of windows), ratio to `without`")
    for name, windows in times.items():
        ratios = [a / b for a, b in zip(windows, base, strict=True)]
        print(
            f"  {name:16} {statistics.median(windows) * 1e6:8.1f} µs   "
            f"x{statistics.median(ratios):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", default=None)
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/h-values"))
    args = parser.parse_args()
    work = args.cache / "token_door"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        files = {k: str(work / f"{k}.sqlite3") for k in ("without", "door")}
        measure(files, args.n, "SQLite (synchronous NORMAL)", synchronous="normal")
        if args.pg:
            with pg_database(args.pg) as a, pg_database(args.pg) as b:
                measure({"without": a, "door": b}, args.n, "PostgreSQL")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
