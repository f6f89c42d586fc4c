"""Benchmark 6: benchmarks 1–3 on PostgreSQL (`--pg URL`).

Each part runs in scratch databases created on that server for this run and dropped after it
(`hs_bench_<pid>…`); the schema is built by the Alembic chain through `Store.open`. The
baseline is raw psycopg over the same server: the same two INSERTs + COMMIT, the same
`executemany`, and upstream's tree SQL on an index-less twin database.
"""

from __future__ import annotations

import os

from .common import Config, Table
from .stores import pg_database


def run(cfg: Config) -> list[Table]:
    from . import batch, checkpoint, group, trees

    if not cfg.pg:
        raise RuntimeError("the pg benchmark needs --pg URL")
    name = f"hs_bench_{os.getpid()}"
    tables: list[Table] = []
    with pg_database(cfg.pg, name) as url:
        tables += checkpoint.run_pg(cfg, url)
        tables += batch.run_pg(cfg, url)
        tables += group.run_pg(cfg, url)
    tables += trees.run_pg(cfg, cfg.pg, f"{name}_trees")
    return tables
