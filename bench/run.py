"""Run harness_store's benchmarks and print their tables.

    python -m bench.run [--quick] [--only NAME[,NAME…]] [--pg URL] [--cache DIR] [--keep]

Benchmarks (names for --only): checkpoint, group, batch, trees, upgrade, stream, cli, accounting,
retention, sync, pg, asyncstore. `sync` needs --pg too (and asyncstore's PostgreSQL rows). `pg`
(1–3 on PostgreSQL) runs only with --pg, e.g.
--pg postgresql+psycopg://postgres@127.0.0.1:5432/test: it creates its own scratch databases
on that server and drops them afterwards.
--quick uses small sizes and few rounds (a smoke run, under two minutes); the full run takes
longer and builds large stores once under --cache (default bench/.cache), reused afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from .common import DEFAULT_CACHE, Config, Table, environment

NAMES = (
    "checkpoint",
    "group",
    "batch",
    "trees",
    "upgrade",
    "stream",
    "cli",
    "accounting",
    "retention",
    "prune",
    "sync",
    "pg",
    "asyncstore",
    "check",
    "otlp",
    "parquet",
)


def benchmark(name: str) -> Callable[[Config], list[Table]]:
    if name == "checkpoint":
        from .checkpoint import run
    elif name == "group":
        from .group import run
    elif name == "batch":
        from .batch import run
    elif name == "trees":
        from .trees import run
    elif name == "upgrade":
        from .upgrade import run
    elif name == "stream":
        from .stream import run
    elif name == "cli":
        from .cli import run
    elif name == "accounting":
        from .accounting import run
    elif name == "pg":
        from .postgres import run
    elif name == "retention":
        from .retention import run
    elif name == "prune":
        from .retention import run_prune as run
    elif name == "sync":
        from .sync import run
    elif name == "asyncstore":
        from .asyncstore import run
    elif name == "check":
        from .check import run
    elif name == "otlp":
        from .otlp import run
    elif name == "parquet":
        from .parquet import run
    else:
        raise ValueError(name)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds (< 2 min)")
    parser.add_argument(
        "--only", action="append", default=[], help=f"comma-separated subset of {', '.join(NAMES)}"
    )
    parser.add_argument(
        "--pg",
        metavar="URL",
        default=os.environ.get("HARNESS_BENCH_PG"),
        help="PostgreSQL server for benchmark 6 (or $HARNESS_BENCH_PG)",
    )
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="where built stores are kept between runs"
    )
    parser.add_argument("--keep", action="store_true", help="keep this run's scratch directory")
    args = parser.parse_args(argv)

    chosen = [n.strip() for item in args.only for n in item.split(",") if n.strip()] or list(NAMES)
    unknown = [n for n in chosen if n not in NAMES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    if "pg" in chosen and not args.pg:
        if args.only:
            parser.error("the pg benchmark needs --pg URL")
        chosen.remove("pg")

    args.cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hs-bench-"))
    cfg = Config(quick=args.quick, cache=args.cache.resolve(), work=work, pg=args.pg)
    started = time.perf_counter()
    print(f"# harness_store benchmarks ({'quick' if args.quick else 'full'})\n")
    for line in environment(cfg):
        print(f"- {line}")
    if not args.pg:
        print("- PostgreSQL benchmarks skipped (no --pg URL)")
    print(flush=True)

    tables: list[Table] = []
    failed: list[str] = []
    try:
        for name in chosen:
            print(f"## {name}\n", flush=True)
            began = time.perf_counter()
            try:
                for table in benchmark(name)(cfg):
                    tables.append(table)
                    print(table.render(), flush=True)
            except Exception:
                failed.append(name)
                print("```\n" + traceback.format_exc() + "```\n", flush=True)
            print(f"({name}: {time.perf_counter() - began:.0f} s)\n", flush=True)
    finally:
        if args.keep:
            print(f"(scratch kept in {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)

    print("## Targets\n")
    for table in tables:
        for what, ok in table.verdicts:
            print(f"- {'PASS' if ok else 'MISS'}  {what}")
    for name in failed:
        print(f"- ERROR {name} (see its traceback above)")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\ntotal: {time.perf_counter() - started:.0f} s; load average at the end: {load}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
