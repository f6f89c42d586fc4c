"""Run harness_store's benchmarks and print their tables.

    python -m bench.run [--list] [--quick] [--only NAME[,NAME…]] [--pg URL] [--cache DIR] [--keep]

`--list` shows every benchmark by name (for --only), the tables it prints and the figure of the
docs each one backs. `--pg URL` (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test) adds
the PostgreSQL rows: each benchmark creates its own scratch databases on that server and drops
them afterwards; `pg` (1–3 on PostgreSQL), `sync` and `follow` run only with it.
--quick uses small sizes and few rounds (a smoke run, a few minutes); the full run takes
longer and builds large stores once under --cache (default bench/.cache), reused afterwards.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .common import DEFAULT_CACHE, Config, Table, environment


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: where its code is, what it prints, and which figure of the docs it backs."""

    name: str
    """Its name for --only."""
    module: str
    """Its module in `bench`, holding `function(config) -> list[Table]`."""
    tables: str
    """The tables it prints (by their numbers where they have one)."""
    figure: str
    """The page and section (or table) of the docs whose figures it produces."""
    function: str = "run"
    postgresql: str = "rows with --pg"
    """What it does on PostgreSQL: "rows with --pg", "needs --pg" or "SQLite only"."""

    def runner(self) -> Callable[[Config], list[Table]]:
        module = importlib.import_module(f"{__package__}.{self.module}")
        return getattr(module, self.function)  # type: ignore[no-any-return]


BENCH = "docs/benchmarks.md"
BENCHMARKS = (
    Benchmark("checkpoint", "checkpoint", "1", f"{BENCH}: Summary, `checkpoint_step` rows ¹; "
              "Checkpoints on SQLite", postgresql="in pg"),
    Benchmark("group", "group", "11", f"{BENCH}: Summary, threads rows ²; Group commit",
              postgresql="in pg"),
    Benchmark("batch", "batch", "2", f"{BENCH}: Summary, `checkpoint_steps` row",
              postgresql="in pg"),
    Benchmark("trees", "trees", "3, 3b", f"{BENCH}: Summary, tree rows; Tree aggregates on "
              "an upgraded store", postgresql="in pg"),
    Benchmark("upgrade", "upgrade", "4", f"{BENCH}: Summary, upgrade rows; Upgrades",
              postgresql="SQLite only"),
    Benchmark("stream", "stream", "5", f"{BENCH}: Summary, `iter_steps` row",
              postgresql="SQLite only"),
    Benchmark("cli", "cli", "7", f"{BENCH}: The command on a million steps",
              postgresql="SQLite only"),
    Benchmark("startup", "startup", "16", f"{BENCH}: How soon the command answers",
              postgresql="SQLite only"),
    Benchmark("accounting", "accounting", "spend roll-ups, run roll-ups, write cost",
              f"{BENCH}: Accounting roll-ups on a million provider calls"),
    Benchmark("retention", "retention", "9, 9.1",
              f"{BENCH}: Retention; docs/guides/retention.md: Figures"),
    Benchmark("prune", "retention", "9.2", "docs/guides/retention.md: Figures",
              function="run_prune"),
    Benchmark("prune-scale", "retention", "9.3", "docs/guides/retention.md: Figures",
              function="run_prune_scale", postgresql="SQLite only"),
    Benchmark("sync", "sync", "10, 10b", f"{BENCH}: Sync of many stores into PostgreSQL; "
              "docs/guides/sync.md: Copy and sync, side by side", postgresql="needs --pg"),
    Benchmark("follow", "follow", "14a, 14b, 14c", "docs/guides/sync.md: Following, figures",
              postgresql="needs --pg"),
    Benchmark("follow-aged", "follow", "14a (a year's sources beside new ones)",
              f"{BENCH}: A year's size, following", function="run_aged",
              postgresql="needs --pg"),
    Benchmark("follow-twenty", "follow", "14b (20 followers into one centre)",
              f"{BENCH}: A year's size, following", function="run_twenty",
              postgresql="needs --pg"),
    Benchmark("follow-aged-sqlite", "follow", "14a (a year's sources, a SQLite centre)",
              f"{BENCH}: A year's size, following", function="run_aged_sqlite",
              postgresql="SQLite only"),
    Benchmark("sync-trees", "sync", "10c at 100,000 runs", f"{BENCH}: Trees of sub-agents "
              "and root runs", function="run_trees", postgresql="needs --pg"),
    Benchmark("sync-profile", "sync_profile", "10d", f"{BENCH}: Trees of sub-agents and root "
              "runs, where the time goes", postgresql="needs --pg"),
    Benchmark("roles", "roles", "18", "docs/guides/security.md: What the rules cost",
              postgresql="needs --pg"),
    Benchmark("pg", "postgres", "6.1 (checkpoint), 6.2 (batch), 11.1 (group), 6.3 (trees)",
              f"{BENCH}: Summary, PostgreSQL rows ³ ⁴; Checkpoints on PostgreSQL; "
              "docs/design/connector.md: Figures", postgresql="needs --pg"),
    Benchmark("pgthreads", "pgthreads", "14", f"{BENCH}: PostgreSQL, many threads",
              postgresql="needs --pg"),
    Benchmark("pointreads", "pointreads", "15", f"{BENCH}: Point reads"),
    Benchmark("asyncstore", "asyncstore", "12",
              f"{BENCH}: AsyncStore; docs/design/connector.md: Figures"),
    Benchmark("check", "check", "check beside PRAGMA integrity_check",
              "docs/guides/health.md: How long it takes"),
    Benchmark("otlp", "otlp", "13", "docs/guides/otel.md: Figures", postgresql="SQLite only"),
    Benchmark("scale", "scale", "17, 17b", f"{BENCH}: A year's size",
              postgresql="SQLite only"),
    Benchmark("scale-maintenance", "scale", "17c, 17d", f"{BENCH}: A year's size, check, "
              "export, prune and compact", function="maintenance", postgresql="SQLite only"),
    Benchmark("scale-turns", "scale_turns", "17e", f"{BENCH}: A year's size, what a "
              "writer waits for beside a prune", postgresql="SQLite only"),
    Benchmark("parquet", "parquet", "Parquet export, its peak memory, incremental export",
              "docs/guides/analysis.md: Figures"),
)  # fmt: skip
NAMES = tuple(b.name for b in BENCHMARKS)
BY_NAME = {b.name: b for b in BENCHMARKS}


def benchmark(name: str) -> Callable[[Config], list[Table]]:
    if name not in BY_NAME:
        raise ValueError(name)
    return BY_NAME[name].runner()


def listing() -> str:
    """The --list table: every benchmark, its tables, PostgreSQL and the figure it backs."""
    rows = [("name", "tables", "PostgreSQL", "figure it produces")]
    rows += [(b.name, b.tables, b.postgresql, b.figure) for b in BENCHMARKS]
    widths = [max(len(row[k]) for row in rows[:-1] + rows[-1:]) for k in range(3)]
    out = []
    for row in rows:
        out.append("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)))
        out[-1] += "  " + row[3]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--list", action="store_true", help="show the benchmarks and the figure each produces"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds")
    parser.add_argument(
        "--only", action="append", default=[], help=f"comma-separated subset of {', '.join(NAMES)}"
    )
    parser.add_argument(
        "--pg",
        metavar="URL",
        default=os.environ.get("HARNESS_BENCH_PG"),
        help="PostgreSQL server for the PostgreSQL rows and `pg` (or $HARNESS_BENCH_PG)",
    )
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="where built stores are kept between runs"
    )
    parser.add_argument("--keep", action="store_true", help="keep this run's scratch directory")
    args = parser.parse_args(argv)
    if args.list:
        print(listing())
        return 0

    chosen = [n.strip() for item in args.only for n in item.split(",") if n.strip()] or list(NAMES)
    unknown = [n for n in chosen if n not in NAMES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    for name in ("pg", "pgthreads"):
        if name in chosen and not args.pg:
            if args.only:
                parser.error(f"the {name} benchmark needs --pg URL")
            chosen.remove(name)

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
