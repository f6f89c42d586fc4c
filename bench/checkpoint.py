"""Benchmark 1: `Store.checkpoint_step` throughput on a file store in WAL.

Baselines, each on its own copy of the same chain-built store (same tables, same hs_ indexes):
- raw `sqlite3` doing what a checkpoint is — `BEGIN IMMEDIATE`, the steps INSERT, the
  checkpoint_events INSERT, COMMIT — with the Store's pragmas (no implicit transactions,
  busy_timeout 5 s, the same `synchronous`);
- LangGraph's `SqliteSaver.put` (per call) on its own WAL file, with the same `synchronous`,
  saving a checkpoint that holds the same step (the smallest, most favourable checkpoint:
  a real LangGraph checkpoint carries the whole graph state and grows with the run).
Run once with synchronous=FULL (upstream's durability) and once with NORMAL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from .common import (
    Config,
    Table,
    alternating,
    fmt_rate,
    fmt_ratio,
    fmt_time,
    median,
    say,
    speedup,
    spread,
    step_record,
)
from .stores import (
    INSERT_CHECKPOINT,
    INSERT_STEP,
    copy_store,
    head_template,
    raw_connect,
    store_pragmas,
)

RUN_ID = 1
TARGETS = {"full": 0.8, "normal": 0.7}
WARMUP = 50
"""Calls of each variant before timing starts."""
PROBE = 100
"""Calls of each variant used afterwards to count WAL frames per call."""


def store_op(store: Any, records: list[Any]) -> Callable[[int], None]:
    checkpoint = store.checkpoint_step

    def op(i: int) -> None:
        checkpoint(RUN_ID, records[i])

    return op


def raw_op(conn: sqlite3.Connection, records: list[Any]) -> Callable[[int], None]:
    cursor = conn.cursor()
    execute, commit = cursor.execute, conn.commit

    def op(i: int) -> None:
        r = records[i]
        execute("BEGIN IMMEDIATE")
        execute(
            INSERT_STEP, (RUN_ID, r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens)
        )
        execute(INSERT_CHECKPOINT, (RUN_ID, r.step))
        commit()

    return op


def langgraph_op(
    path: Any, synchronous: str, records: list[Any]
) -> tuple[Callable[[int], None], sqlite3.Connection]:
    """`SqliteSaver.put` on its own file, one checkpoint per record; returns (op, connection)."""
    from langgraph.checkpoint.base import LATEST_VERSION
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()  # creates its tables and sets journal_mode=WAL
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")

    def checkpoint_of(r: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        checkpoint = {
            "v": LATEST_VERSION,
            "id": str(uuid6(clock_seq=r.step)),
            "ts": "2025-01-01T00:00:00.000000+00:00",
            "channel_values": {
                "step": r.step,
                "decision": r.decision,
                "result": r.result,
                "prompt": r.prompt,
                "tool_call": r.tool_call,
                "tokens": r.tokens,
            },
            "channel_versions": {"step": r.step},
            "versions_seen": {},
            "updated_channels": ["step"],
        }
        return checkpoint, {"source": "loop", "step": r.step, "parents": {}}

    prepared = [checkpoint_of(r) for r in records]
    put = saver.put
    config: list[Any] = [{"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}]

    def op(i: int) -> None:
        checkpoint, metadata = prepared[i]
        config[0] = put(config[0], checkpoint, metadata, {})

    return op, conn


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


def run(cfg: Config) -> list[Table]:
    from harness_store import Store

    template = head_template(cfg)
    table = Table(
        "1. checkpoint_step on a file store (WAL), per call",
        [
            "synchronous",
            "variant",
            "median/call",
            "calls/s",
            "noise",
            "vs baseline",
            "target",
            "result",
        ],
    )
    frames: dict[str, float] = {}
    autocheckpoint = None
    for sync in ("full", "normal"):
        # One call of each variant in turn (order rotated), summed per window: fsync latency on
        # a shared disk swings several-fold within seconds, and only calls made side by side
        # see the same disk. Windows span several WAL auto-checkpoints under NORMAL.
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
        ops = {
            "store": store_op(store, records),
            "raw": raw_op(raw, records),
        }
        ops["langgraph"], lg_conn = langgraph_op(lg_path, sync, records)
        lg_sync = lg_conn.execute("PRAGMA synchronous").fetchone()[0]
        try:
            results = alternating(list(ops.items()), n, window, WARMUP)
            if sync == "normal":
                probe = WARMUP + n
                frames = {
                    "Store": wal_frames_per_call(store_path, ops["store"], probe, PROBE),
                    "raw": wal_frames_per_call(raw_path, ops["raw"], probe, PROBE),
                    "SqliteSaver": wal_frames_per_call(lg_path, ops["langgraph"], probe, PROBE),
                }
        finally:
            store.close()
            raw.close()
            lg_conn.close()
        label = sync.upper()
        s, r, g = results["store"], results["raw"], results["langgraph"]
        vs_raw = speedup(r, s)
        vs_lg = speedup(g, s)
        table.add(
            label,
            "raw sqlite3 (baseline)",
            fmt_time(median(r)),
            fmt_rate(1 / median(r)),
            spread(r),
            "1.00×",
            "",
            "",
        )
        table.add(
            label,
            "Store.checkpoint_step",
            fmt_time(median(s)),
            fmt_rate(1 / median(s)),
            spread(s),
            f"{fmt_ratio(vs_raw)} raw",
            f"≥ {TARGETS[sync]:.2f}× raw",
            table.check(
                f"SQLite checkpoint_step {label} ≥ {TARGETS[sync]}× raw sqlite3",
                vs_raw >= TARGETS[sync],
            ),
        )
        table.add(
            label,
            "LangGraph SqliteSaver.put",
            fmt_time(median(g)),
            fmt_rate(1 / median(g)),
            spread(g),
            f"{fmt_ratio(speedup(r, g))} raw",
            "",
            "",
        )
        table.add(
            label,
            "Store vs SqliteSaver.put",
            "",
            "",
            "",
            f"{fmt_ratio(vs_lg)} faster",
            "> 1.00×",
            table.check(f"SQLite checkpoint_step {label} faster than SqliteSaver.put", vs_lg > 1.0),
        )
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
    table.notes.append(
        "median/call = median over windows of the mean call time; 'vs baseline' = median over "
        "windows of (baseline time / candidate time); 'noise' = half the max/min spread of the "
        "window means"
    )
    table.notes.append(
        "payload per step: prompt ~300 B, tool_call ~100 B, result ~50 B; the SqliteSaver "
        "checkpoint holds exactly that step (msgpack-serialised) — the smallest checkpoint it "
        "can write"
    )
    return [table]


# --- PostgreSQL ----------------------------------------------------------------------------

PG_INSERT_STEP = (
    "INSERT INTO steps (run_id, step, decision, result, prompt, tool_call, tokens) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
PG_INSERT_CHECKPOINT = (
    "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (%s, %s, 'checkpoint', NULL)"
)
PG_ONE_STATEMENT = (
    f"WITH step_row AS ({PG_INSERT_STEP}) "
    "INSERT INTO checkpoint_events (run_id, step, kind, detail) VALUES (%s, %s, 'checkpoint', NULL)"
)
"""Both rows in one autocommitted statement, as the Store's PostgreSQL backend writes them."""


def run_pg(cfg: Config, url: Any) -> list[Table]:
    """`checkpoint_step` on PostgreSQL vs raw psycopg doing the same two INSERTs + COMMIT, and
    vs raw psycopg sending the Store's own single statement (the floor for this server)."""
    import psycopg

    from harness_store import Store

    from .stores import pg_conninfo

    table = Table(
        "6.1 checkpoint_step on PostgreSQL, per call",
        ["variant", "median/call", "calls/s", "noise", "vs raw psycopg", "target", "result"],
    )
    n = cfg.pick(750, 120)
    window = cfg.pick(25, 20)
    records = [step_record(k) for k in range(1, WARMUP + n + 1)]
    store = Store.open(url)
    store_run = store.start_run("benchmark run (Store)", "src/parser.rs")
    raw_run = store.start_run("benchmark run (raw)", "src/parser.rs")
    one_run = store.start_run("benchmark run (raw, one statement)", "src/parser.rs")
    raw = psycopg.connect(pg_conninfo(url))
    one = psycopg.connect(pg_conninfo(url), autocommit=True)
    commit_mode = raw.execute("SHOW synchronous_commit").fetchone()[0]
    raw.commit()
    checkpoint = store.checkpoint_step
    cursor, one_cursor = raw.cursor(), one.cursor()
    execute, commit = cursor.execute, raw.commit

    def store_call(i: int) -> None:
        checkpoint(store_run, records[i])

    def raw_call(i: int) -> None:
        r = records[i]
        execute(
            PG_INSERT_STEP,
            (raw_run, r.step, r.decision, r.result, r.prompt, r.tool_call, r.tokens),
        )
        execute(PG_INSERT_CHECKPOINT, (raw_run, r.step))
        commit()

    def one_call(i: int) -> None:
        r = records[i]
        one_cursor.execute(
            PG_ONE_STATEMENT,
            (
                one_run,
                r.step,
                r.decision,
                r.result,
                r.prompt,
                r.tool_call,
                r.tokens,
                one_run,
                r.step,
            ),
        )

    say(f"PostgreSQL checkpoint_step: {n} calls per variant, alternating")
    try:
        results = alternating(
            [("store", store_call), ("raw", raw_call), ("one", one_call)], n, window, WARMUP
        )
    finally:
        cursor.close()
        one_cursor.close()
        store.close()
        raw.close()
        one.close()
    s, r, o = results["store"], results["raw"], results["one"]
    ratio = speedup(r, s)
    table.add(
        "raw psycopg: BEGIN, 2 INSERTs, COMMIT (baseline)",
        fmt_time(median(r)),
        fmt_rate(1 / median(r)),
        spread(r),
        "1.00×",
        "",
        "",
    )
    table.add(
        "raw psycopg: the Store's one statement, autocommit",
        fmt_time(median(o)),
        fmt_rate(1 / median(o)),
        spread(o),
        fmt_ratio(speedup(r, o)),
        "",
        "",
    )
    table.add(
        "Store.checkpoint_step",
        fmt_time(median(s)),
        fmt_rate(1 / median(s)),
        spread(s),
        f"{fmt_ratio(ratio)} ({fmt_ratio(speedup(o, s))} of one statement)",
        "≥ 0.80× raw",
        table.check("PostgreSQL checkpoint_step ≥ 0.8× raw psycopg", ratio >= 0.8),
    )
    table.notes.append(
        f"server synchronous_commit = {commit_mode}; all over TCP to the same server and "
        f"database; {n} calls each, alternating call by call, {n // window} windows of {window}; "
        "target taken from the SQLite FULL one"
    )
    table.notes.append(
        "the Store writes both rows in one statement (the step INSERT as a data-modifying CTE) "
        "in autocommit: one round trip, where the baseline makes four, on a connection the "
        "Store keeps; a kept connection idle for over 0.1 ms is pinged first (an empty query: "
        "one more round trip) — here, alternating call by call, it always is"
    )
    return [table]
