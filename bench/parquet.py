"""Parquet export: a large store's steps through `harness-store export parquet`'s writer,
beside the floor — the same rows fetched with the raw driver and written by plain pyarrow —
then the export's peak memory at two store sizes, and an incremental export with nothing new.

With `--pg`, the same store copied into PostgreSQL is exported beside psycopg's floor too.
The store is built with the raw driver (upstream's own INSERT, one transaction), the fastest
builder there is: N steps over 100 runs, each with a ~300-byte prompt and a ~100-byte tool
call. The floor writes the stored columns only; the export also converts and writes the
parsed `tool`/`tool_args` columns, so the ratio includes that work.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from .common import (
    Config,
    Table,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    interleaved,
    median,
    prompt,
    say,
    speedup,
    spread,
    tool_call,
)
from .stores import (
    INSERT_STEP,
    copy_store,
    head_template,
    pg_conninfo,
    pg_database,
)

RUNS = 100
BATCH = 32_768
SCHEMA_COLUMNS = ("id", "run_id", "step", "decision", "result", "prompt", "tool_call", "tokens")


def build(cfg: Config, steps: int) -> Path:
    """A store of `steps` steps over `RUNS` runs (cached between invocations)."""
    path = cfg.cache / f"parquet-{steps}.sqlite3"
    if path.exists():
        return path
    say(f"building a {steps:,}-step store")
    scratch = copy_store(head_template(cfg), cfg.work / "building.sqlite3")
    with closing(sqlite3.connect(scratch, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        for run in range(2, RUNS + 1):
            conn.execute(
                "INSERT INTO runs (id, goal, file, outcome, provider, parent_run_id, depth, "
                "status, started_at) VALUES (?, 'g', 'f', NULL, NULL, NULL, 0, 'running', "
                "strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
                (run,),
            )
        per_run = steps // RUNS

        def rows() -> object:
            for n in range(steps):
                run, step = min(1 + n // per_run, RUNS), n % per_run + 1
                yield (run, step, "tool", f"ok {n}", prompt(n), "edit_file:" + tool_call(n), n)

        conn.executemany(INSERT_STEP, rows())  # type: ignore[arg-type]
        conn.execute("COMMIT")
    shutil.move(scratch, path)
    return path


SELECT = f"SELECT {', '.join(SCHEMA_COLUMNS)} FROM steps ORDER BY id"


def floor(target: str, out: Path, *, as_struct: bool = False) -> float:
    """The same rows fetched with the raw driver (`sqlite3`; psycopg through a server-side
    cursor, as the export reads, so neither holds the whole result) and written with pyarrow:
    the least any export of them can cost. Each batch's columns are built as a plain script
    builds them, transposed in Python; `as_struct` builds them as the export does, the rows
    read as a struct's values in one pyarrow pass (the floor's own best)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types: list[pa.DataType] = [pa.int64(), pa.int64(), pa.int64(), pa.string(), pa.string(),
                                pa.string(), pa.string(), pa.uint64()]  # fmt: skip
    schema = pa.schema(list(zip(SCHEMA_COLUMNS, types, strict=True)))
    start = time.perf_counter()
    with _raw_cursor(target) as cursor:
        cursor.execute(SELECT)
        with pq.ParquetWriter(out, schema, compression="zstd") as writer:
            while rows := cursor.fetchmany(BATCH):
                if as_struct:
                    struct = pa.array(rows, type=pa.struct(list(schema)))
                    arrays = struct.flatten()  # type: ignore[attr-defined]
                else:
                    columns = list(zip(*rows, strict=True))
                    arrays = [pa.array(c, type=t) for c, t in zip(columns, types, strict=True)]
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return time.perf_counter() - start


@contextmanager
def _raw_cursor(target: str) -> Iterator[Any]:
    if "://" not in target:
        with closing(sqlite3.connect(target)) as lite:
            yield lite.cursor()
        return
    import psycopg

    with psycopg.connect(pg_conninfo(target)) as pg, pg.cursor("floor") as server_side:
        yield server_side


def export(target: str | Path, out: Path, tables: list[str] | None) -> float:
    from harness_store import Store
    from harness_store.analytics.dataset import export_parquet

    start = time.perf_counter()
    read_only = "://" not in str(target)  # a read-only PostgreSQL Store is not asked for
    with Store.open(target, read_only=read_only) as store:
        export_parquet(store, out, tables=tables)
    return time.perf_counter() - start


PROBE = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)
"""Run a command as the only child of a fresh process and print its peak RSS (KiB)."""


def peak_rss(path: Path, out: Path) -> int:
    """Peak resident memory (bytes) of one `harness-store export parquet` process."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "harness_store.cli", "export", "parquet", str(path),
               str(out), "--tables", "steps"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *command], check=True, capture_output=True, text=True
    )
    return int(done.stdout.strip()) * 1024


def run(cfg: Config) -> list[Table]:
    steps = cfg.pick(1_000_000, 100_000)
    small = steps // 4
    big_store, small_store = build(cfg, steps), build(cfg, small)
    rounds = cfg.pick(3, 1)
    tables = [speed_table(cfg, "SQLite", str(big_store), steps, rounds)]
    if cfg.pg:
        from harness_store import copy_store as copy_into

        with pg_database(cfg.pg, "hs_bench_parquet") as url:
            say(f"copying the {steps:,}-step store into PostgreSQL")
            copy_into(big_store, url)  # reads the store, never writes it
            target = url.render_as_string(hide_password=False)
            tables.append(speed_table(cfg, "PostgreSQL", target, steps, cfg.pick(2, 1)))

    say("peak memory at two store sizes")
    small_peak = peak_rss(small_store, cfg.work / "rss-small")
    big_peak = peak_rss(big_store, cfg.work / "rss-big")
    memory = Table(
        "Peak memory of `harness-store export parquet --tables steps`",
        ["store", "steps", "peak RSS"],
    )
    memory.add("small", f"{small:,}", fmt_bytes(small_peak))
    memory.add("large", f"{steps:,}", fmt_bytes(big_peak))
    growth = big_peak / small_peak
    memory.add(
        "target",
        f"{steps // small}× the rows",
        f"{growth:.2f}× the memory: " + memory.check("peak memory flat (< 1.5×)", growth < 1.5),
    )

    say("an incremental export with nothing new")
    out = cfg.work / "incremental"
    shutil.rmtree(out, ignore_errors=True)
    export(big_store, out, None)
    again = [export(big_store, out, None) for _ in range(cfg.pick(3, 2))]
    incremental = Table(
        f"Incremental export of every table, nothing new ({steps:,}-step store)",
        ["export", "time"],
    )
    incremental.add("nothing new (median)", fmt_time(median(again)))
    incremental.add(
        "target", "under 1 s: " + incremental.check("no-op export < 1 s", median(again) < 1.0)
    )
    return [*tables, memory, incremental]


def speed_table(cfg: Config, backend: str, target: str, steps: int, rounds: int) -> Table:
    """The export of `target`'s steps beside the floor, alternated round by round."""

    cpu: dict[str, list[float]] = {"floor": [], "export": []}

    def timed_floor() -> float:
        out = cfg.work / "floor.parquet"
        out.unlink(missing_ok=True)
        start = time.process_time()
        took = floor(target, out)
        cpu["floor"].append(time.process_time() - start)
        return took

    def timed_struct_floor() -> float:
        out = cfg.work / "floor.parquet"
        out.unlink(missing_ok=True)
        return floor(target, out, as_struct=True)

    def timed_export() -> float:
        out = cfg.work / "export"
        shutil.rmtree(out, ignore_errors=True)
        start = time.process_time()
        took = export(target, out, ["steps"])
        cpu["export"].append(time.process_time() - start)
        return took

    say(f"{backend}: exporting {steps:,} steps, {rounds} round(s) beside the floor")
    variants = [("floor", timed_floor), ("export", timed_export),
                ("floor, rows as a struct", timed_struct_floor)]  # fmt: skip
    results = interleaved(variants, rounds, warmup=0)
    ratio = speedup(results["floor"], results["export"])  # floor time / export time
    speed = Table(
        f"Parquet export of {steps:,} steps on {backend}: beside plain pyarrow on the raw driver",
        ["writer", "time", "rows/s", "spread", "of the floor's speed"],
    )
    for name in ("floor", "export", "floor, rows as a struct"):
        t = median(results[name])
        cell = "1.00×" if name == "floor" else fmt_ratio(speedup(results["floor"], results[name]))
        speed.add(name, fmt_time(t), f"{steps / t:,.0f}", spread(results[name]), cell)
    each = ", ".join(
        f"{f / e:.2f}×" for f, e in zip(results["floor"], results["export"], strict=True)
    )
    speed.add(
        "target",
        "",
        "",
        "",
        speed.check(f"{backend} export ≥ 0.8× the floor's speed", ratio >= 0.8),
    )
    speed.notes.append(
        f"ratio = floor time / export time per round, median (rounds: {each}); the export "
        "also writes the parsed tool/tool_args columns and restores upstream's types"
    )
    best = speedup(results["floor, rows as a struct"], results["export"])
    speed.notes.append(
        f"against the floor building its columns as the export does (rows as a struct): "
        f"{best:.2f}× (rounds: "
        + ", ".join(
            f"{f / e:.2f}×"
            for f, e in zip(results["floor, rows as a struct"], results["export"], strict=True)
        )
        + ")"
    )
    busy = ", ".join(f"{f / e:.2f}×" for f, e in zip(cpu["floor"], cpu["export"], strict=True))
    speed.notes.append(
        f"the same ratio in this process's CPU time, which other processes' load disturbs "
        f"less: median {speedup(cpu['floor'], cpu['export']):.2f}× (rounds: {busy})"
    )
    return speed
