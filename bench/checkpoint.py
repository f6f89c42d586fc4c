"""Benchmark 1: `Store.checkpoint_step` per call against upstream's checkpoint by hand on the
raw driver — on SQLite (`checkpoint`: a file store in WAL, synchronous FULL and NORMAL) and on
PostgreSQL (6.1, part of `pg`), one body run per backend.

Each variant writes its own run (on SQLite its own copy of the same chain-built store: same
tables, same hs_ indexes), one call of each in turn:
- the baseline, the raw driver doing what a checkpoint is — open a transaction
  (`BEGIN IMMEDIATE` on SQLite), the steps INSERT, the checkpoint_events INSERT, COMMIT; on
  SQLite with the Store's pragmas (no implicit transactions, busy_timeout 5 s, the same
  `synchronous`);
- the backend's own extra baseline: on SQLite LangGraph's `SqliteSaver.put` on its own WAL
  file, with the same `synchronous`, saving a checkpoint that holds the same step (the
  smallest, most favourable checkpoint: a real LangGraph checkpoint carries the whole graph
  state and grows with the run); on PostgreSQL raw psycopg sending the Store's own single
  statement in autocommit (the floor for that server).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .common import (
    Config,
    Table,
    add_variant,
    alternating,
    checkpoint_ops,
    fmt_ratio,
    say,
    speedup,
    step_record,
)
from .stores import (
    INSERT_STEP,
    POSTGRESQL,
    SQLITE,
    Backend,
    copy_store,
    head_template,
    raw_checkpoint_op,
    raw_connect,
    sqlite_saver_op,
    store_pragmas,
)

RUN_ID = 1
TARGETS = {"full": 0.8, "normal": 0.7}
PG_TARGET = 0.8
WARMUP = 50
"""Calls of each variant before timing starts."""
PROBE = 100
"""Calls of each variant used afterwards to count WAL frames per call."""


def wal_frames_per_call(path: Any, op: Callable[[int], None], first: int, n: int) -> float:
    """WAL frames one call appends (pages written per commit), measured with a side connection:
    empty the WAL, run `n` calls (too few to reach an auto-checkpoint), count the frames."""
    side = sqlite3.connect(path, isolation_level=None)
    try:
        side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        for i in range(first, first + n):
            op(i)
        frames = side.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    finally:
        side.close()
    return int(frames) / n


@dataclass(frozen=True)
class Extra:
    """The backend's own second baseline beside the raw driver."""

    label: str
    """Its row's label."""
    op: Callable[[int], None]
    """op(i) saves `records[i]` its way."""
    versus: str
    """The label of the row comparing the Store with it."""
    must_beat: bool
    """Whether the Store is to be faster than it (a target) or it is the floor (a reference)."""


def measure(
    backend: Backend,
    store: Any,
    raw: Any,
    runs: tuple[int, int],
    extra: Extra,
    records: list[Any],
    n: int,
    window: int,
) -> dict[str, list[float]]:
    """`n` timed calls of each variant after WARMUP, one call of each in turn (order
    rotated), summed per window: commit latency on a shared machine swings several-fold
    within seconds, and only calls made side by side see the same disk and server."""
    record = records.__getitem__
    ops = [
        ("store", checkpoint_ops(store, [runs[0]], record)[0]),
        ("raw", raw_checkpoint_op(backend, raw, runs[1], record)),
        ("extra", extra.op),
    ]
    return alternating(ops, n, window, WARMUP)


def add_rows(
    table: Table,
    backend: Backend,
    level: str,
    results: dict[str, list[float]],
    target: float,
    extra: Extra,
) -> None:
    """The baseline, the Store against it (the target), the extra baseline, and the Store
    against that; `level` names the durability (a leading column on SQLite)."""
    lead = [level] if level else []
    s, r, e = results["store"], results["raw"], results["extra"]
    vs_raw = speedup(r, s)
    vs_extra = speedup(e, s)
    named = f"{backend.name} checkpoint_step{' ' + level if level else ''}"
    add_variant(table, lead, f"{backend.raw}: BEGIN, 2 INSERTs, COMMIT (baseline)", r, "1.00×")
    add_variant(
        table, lead, "Store.checkpoint_step", s, f"{fmt_ratio(vs_raw)} raw",
        f"≥ {target:.2f}× raw",
        table.check(f"{named} ≥ {target}× {backend.raw}", vs_raw >= target),
    )  # fmt: skip
    add_variant(table, lead, extra.label, e, f"{fmt_ratio(speedup(r, e))} raw")
    table.add(
        *lead,
        extra.versus,
        "",
        "",
        "",
        f"{fmt_ratio(vs_extra)} {'faster' if extra.must_beat else 'of it'}",
        "> 1.00×" if extra.must_beat else "",
        table.check(f"{named} faster than {extra.label}", vs_extra > 1.0)
        if extra.must_beat
        else "",
    )


def columns(versus: str) -> list[str]:
    return ["variant", "median/call", "calls/s", "noise", versus, "target", "result"]


NOTE_TIMING = (
    "median/call = median over windows of the mean call time; 'vs baseline' = median over "
    "windows of (baseline time / candidate time); 'noise' = half the max/min spread of the "
    "window means"
)


def run(cfg: Config) -> list[Table]:
    """Benchmark 1 on SQLite, under FULL (upstream's durability) and NORMAL."""
    from harness_store import Store

    template = head_template(cfg)
    table = Table(
        "1. checkpoint_step on a file store (WAL), per call",
        ["synchronous", *columns("vs baseline")],
    )
    frames: dict[str, float] = {}
    autocheckpoint = None
    for sync in ("full", "normal"):
        # Windows span several WAL auto-checkpoints under NORMAL.
        n = cfg.pick({"full": 1000, "normal": 6000}, {"full": 160, "normal": 800})[sync]
        window = cfg.pick({"full": 25, "normal": 200}, {"full": 20, "normal": 100})[sync]
        total = WARMUP + n + PROBE
        records = [step_record(k) for k in range(1, total + 1)]
        say(f"checkpoint_step, synchronous={sync}: {n} calls per variant, alternating")
        store_path = copy_store(template, cfg.work / f"cp-store-{sync}.sqlite3")
        store = Store.open(store_path, synchronous=sync)
        actual_sync, mode = store_pragmas(store)
        raw_path = copy_store(template, cfg.work / f"cp-raw-{sync}.sqlite3")
        raw = raw_connect(raw_path, sync, like=store)
        raw_sync = raw.execute("PRAGMA synchronous").fetchone()[0]
        raw_mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
        raw_autocheckpoint = raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        with store.engine.connect() as conn:
            autocheckpoint = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one()
        lg_path = cfg.work / f"cp-langgraph-{sync}.sqlite3"
        lg_op, lg_conn = sqlite_saver_op(lg_path, sync, records)
        lg_sync = lg_conn.execute("PRAGMA synchronous").fetchone()[0]
        extra = Extra("LangGraph SqliteSaver.put", lg_op, "Store vs SqliteSaver.put", True)
        try:
            results = measure(SQLITE, store, raw, (RUN_ID, RUN_ID), extra, records, n, window)
            if sync == "normal":
                probe = WARMUP + n
                store_op = checkpoint_ops(store, [RUN_ID], records.__getitem__)[0]
                raw_op = raw_checkpoint_op(SQLITE, raw, RUN_ID, records.__getitem__)
                frames = {
                    "Store": wal_frames_per_call(store_path, store_op, probe, PROBE),
                    "raw": wal_frames_per_call(raw_path, raw_op, probe, PROBE),
                    "SqliteSaver": wal_frames_per_call(lg_path, lg_op, probe, PROBE),
                }
        finally:
            store.close()
            raw.close()
            lg_conn.close()
        label = sync.upper()
        add_rows(table, SQLITE, label, results, TARGETS[sync], extra)
        table.notes.append(
            f"{label}: Store connection PRAGMA synchronous = {actual_sync}, journal_mode = {mode}; "
            f"raw: synchronous = {raw_sync}, journal_mode = {raw_mode}, "
            f"wal_autocheckpoint = {raw_autocheckpoint} (the Store's); "
            f"SqliteSaver: synchronous = {lg_sync}; {n} calls each, alternating call by call, "
            f"{n // window} windows of {window}"
        )
    table.notes.append(
        "WAL frames (pages) written per call: "
        + ", ".join(f"{k} {v:.1f}" for k, v in frames.items())
        + f"; the Store's connections checkpoint the WAL every {autocheckpoint} frames "
        "(each checkpoint fsyncs, under NORMAL too)"
    )
    table.notes.append(NOTE_TIMING)
    table.notes.append(
        "payload per step: prompt ~300 B, tool_call ~100 B, result ~50 B; the SqliteSaver "
        "checkpoint holds exactly that step (msgpack-serialised) — the smallest checkpoint it "
        "can write"
    )
    return [table]


PG_ONE_STATEMENT = (
    f"WITH step_row AS ({POSTGRESQL.sql(INSERT_STEP)}) "
    "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (%s, %s, 'checkpoint', NULL)"
)
"""Both rows in one autocommitted statement, as the Store's PostgreSQL backend writes them."""


def run_pg(cfg: Config, url: Any) -> list[Table]:
    """Benchmark 1 on PostgreSQL (6.1, part of `pg`), in the database at `url`, beside raw
    psycopg sending the Store's own single statement (the floor for this server)."""

    from harness_store import Store

    table = Table("6.1 checkpoint_step on PostgreSQL, per call", columns("vs raw psycopg"))
    n = cfg.pick(750, 120)
    window = cfg.pick(25, 20)
    records = [step_record(k) for k in range(1, WARMUP + n + 1)]
    store = Store.open(url)
    store_run = store.start_run("benchmark run (Store)", "src/parser.rs")
    raw_run = store.start_run("benchmark run (raw)", "src/parser.rs")
    one_run = store.start_run("benchmark run (raw, one statement)", "src/parser.rs")
    raw = POSTGRESQL.connect(url, False)
    one = POSTGRESQL.connect(url, True)
    commit_mode = raw.execute("SHOW synchronous_commit").fetchone()[0]
    raw.commit()
    one_cursor = one.cursor()

    def one_call(i: int) -> None:
        r = records[i]
        row = (one_run, r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens)
        one_cursor.execute(PG_ONE_STATEMENT, (*row, one_run, r.step))

    extra = Extra(
        "raw psycopg: the Store's one statement, autocommit",
        one_call,
        "Store vs the one statement",
        False,
    )
    say(f"PostgreSQL checkpoint_step: {n} calls per variant, alternating")
    try:
        results = measure(POSTGRESQL, store, raw, (store_run, raw_run), extra, records, n, window)
    finally:
        one_cursor.close()
        store.close()
        raw.close()
        one.close()
    add_rows(table, POSTGRESQL, "", results, PG_TARGET, extra)
    table.notes.append(
        f"server synchronous_commit = {commit_mode}; all over TCP to the same server and "
        f"database; {n} calls each, alternating call by call, {n // window} windows of {window}; "
        "target taken from the SQLite FULL one"
    )
    table.notes.append(NOTE_TIMING)
    table.notes.append(
        "the Store writes both rows in one statement (the step INSERT as a data-modifying CTE) "
        "in autocommit: one round trip, where the baseline makes four, on a connection the "
        "Store keeps; a kept connection idle for over a second is pinged first (an empty "
        "query: one more round trip) — here, alternating call by call, it never is"
    )
    return [table]
