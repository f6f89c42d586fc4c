"""The peer table: the Store and AsyncStore beside LangGraph's SQLite savers and OpenAI Agents'
`SQLiteSession`, on SQLite, each with its library's default durability, in one run.

`python -m bench.peers [--rounds 3] [--pg URL [--single-writes [--bursts]]]`

Per peer: write one step (µs per call, one writer), 8 writers (calls/s over all: threads for
the sync peers, tasks for the async ones), read the latest state and read a whole history of
1,000 steps (per call), and the file's size after 10,000 steps (WAL checkpointed into it).
Every timed measure runs once per round for every peer, the order rotating; medians.

What each writes per step, holding the same step (number, decision, result, prompt, tool
call, tokens):
- Store / AsyncStore: a `steps` row with those columns and a `checkpoint` event row;
- SqliteSaver / AsyncSqliteSaver: a checkpoint holding the step as its channel values (a
  msgpack blob) with its metadata (JSON), one row of `checkpoints`;
- SQLiteSession: one conversation item (the step as a JSON object), one row of
  `agent_messages`.
What "latest state" returns, the same content for each: the Store the last step's record
(`last_step_record`: the step's number, decision, result, prompt, tool call and tokens, what
a resuming agent reads), a saver the latest checkpoint deserialised (`get_tuple`: the same
step as its channel values), a session its last item (`get_items(limit=1)`: the same step as
one JSON item). A whole history: `steps()`, `list()`, `get_items()`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from .asyncstore import _uuid, drive_tasks
from .common import step_record
from .group import drive
from .stores import langgraph_checkpoint, pg_conninfo, pg_database

HISTORY = 1_000
SIZE_STEPS = 10_000
WRITERS = 8
WRITE_CALLS = 100


def item(r: Any) -> dict[str, Any]:
    """A step as one conversation item of an OpenAI Agents session."""
    return {
        "role": "assistant",
        "content": r.result,
        "step": r.step,
        "decision": r.decision,
        "prompt": r.prompt,
        "tool_call": r.tool_call,
        "tokens": r.tokens,
    }


PG_SIZE = (
    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
    "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
)


def size_of(where: Any) -> int:
    """A SQLite file's size with its WAL checkpointed into it, or a PostgreSQL database's
    tables with their indexes and TOAST."""
    if not isinstance(where, Path):
        import psycopg

        with psycopg.connect(pg_conninfo(where)) as pg:
            row = pg.execute(PG_SIZE).fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    path = where
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(
        Path(str(path) + s).stat().st_size for s in ("", "-wal") if Path(str(path) + s).exists()
    )


class Peer:
    """One library: how it writes a step, reads the latest state and the whole history."""

    name = ""
    is_async = False

    def __init__(self, path: Any) -> None:
        self.path = path
        """A SQLite file, or a PostgreSQL database's SQLAlchemy URL."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def fill(self, count: int) -> None:
        """Write `count` steps into a history of their own (untimed)."""

    def write(self, k: int, n: int) -> Any:
        """Write step n of writer k's history (a coroutine for the async peers)."""

    def latest(self) -> Any: ...
    def history(self) -> Any: ...


class StorePeer(Peer):
    name = "Store"

    async def open(self) -> None:
        from harness_store import Store

        self.store = Store.open(self.path)
        self.runs = [self.store.start_run(f"w{k}", "f") for k in range(WRITERS + 1)]

    async def close(self) -> None:
        self.store.close()

    async def fill(self, count: int) -> None:
        self.store.checkpoint_steps(self.runs[-1], [step_record(n + 1) for n in range(count)])

    def write(self, k: int, n: int) -> Any:
        self.store.checkpoint_step(self.runs[k], step_record(n + 1))

    def latest(self) -> Any:
        return self.store.last_step_record(self.runs[-1])

    def history(self) -> Any:
        return self.store.steps(self.runs[-1])


class AsyncStorePeer(StorePeer):
    name = "AsyncStore"
    is_async = True

    async def open(self) -> None:
        from harness_store import AsyncStore

        self.astore = await AsyncStore.open(self.path)
        self.runs = [await self.astore.start_run(f"w{k}", "f") for k in range(WRITERS + 1)]

    async def close(self) -> None:
        await self.astore.close()

    async def fill(self, count: int) -> None:
        steps = [step_record(n + 1) for n in range(count)]
        await self.astore.checkpoint_steps(self.runs[-1], steps)

    def write(self, k: int, n: int) -> Any:
        return self.astore.checkpoint_step(self.runs[k], step_record(n + 1))

    def latest(self) -> Any:
        return self.astore.last_step_record(self.runs[-1])

    def history(self) -> Any:
        return self.astore.steps(self.runs[-1])


def _config(k: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t{k}", "checkpoint_ns": ""}}


class SaverPeer(Peer):
    name = "SqliteSaver"

    async def open(self) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.configs = {k: _config(k) for k in range(WRITERS + 1)}

    async def close(self) -> None:
        self.conn.close()

    def _put(self, k: int, n: int) -> tuple[Any, Any, Any]:
        checkpoint, metadata = langgraph_checkpoint(step_record(n + 1))
        return self.configs[k], {**checkpoint, "id": str(_uuid(k, n))}, metadata

    async def fill(self, count: int) -> None:
        self.conn.execute("PRAGMA synchronous = OFF")  # untimed: only the result counts
        for n in range(count):
            self.write(WRITERS, n)
        self.conn.execute("PRAGMA synchronous = FULL")

    def write(self, k: int, n: int) -> Any:
        config, checkpoint, metadata = self._put(k, n)
        self.configs[k] = self.saver.put(config, checkpoint, metadata, {})

    def latest(self) -> Any:
        return self.saver.get_tuple(_config(WRITERS))

    def history(self) -> Any:
        return list(self.saver.list(_config(WRITERS)))


class AsyncSaverPeer(SaverPeer):
    name = "AsyncSqliteSaver"
    is_async = True

    async def open(self) -> None:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        self.aconn = await aiosqlite.connect(str(self.path))
        self.asaver = AsyncSqliteSaver(self.aconn)
        await self.asaver.setup()
        self.configs = {k: _config(k) for k in range(WRITERS + 1)}

    async def close(self) -> None:
        await self.aconn.close()

    async def fill(self, count: int) -> None:
        await self.aconn.execute("PRAGMA synchronous = OFF")
        for n in range(count):
            await self.write(WRITERS, n)
        await self.aconn.execute("PRAGMA synchronous = FULL")

    async def write(self, k: int, n: int) -> Any:  # type: ignore[override]
        config, checkpoint, metadata = self._put(k, n)
        self.configs[k] = await self.asaver.aput(config, checkpoint, metadata, {})

    def latest(self) -> Any:
        return self.asaver.aget_tuple(_config(WRITERS))

    async def history(self) -> Any:  # type: ignore[override]
        return [each async for each in self.asaver.alist(_config(WRITERS))]


class SessionPeer(Peer):
    name = "SQLiteSession"
    is_async = True

    async def open(self) -> None:
        from agents.memory import SQLiteSession

        self.sessions = [SQLiteSession(f"s{k}", self.path) for k in range(WRITERS + 1)]

    async def close(self) -> None:
        for session in self.sessions:
            session.close()

    async def fill(self, count: int) -> None:
        await self.sessions[-1].add_items([item(step_record(n + 1)) for n in range(count)])  # type: ignore[misc]

    def write(self, k: int, n: int) -> Any:
        return self.sessions[k].add_items([item(step_record(n + 1))])  # type: ignore[list-item]

    def latest(self) -> Any:
        return self.sessions[-1].get_items(limit=1)

    def history(self) -> Any:
        return self.sessions[-1].get_items()


class PgSaverPeer(SaverPeer):
    name = "PostgresSaver"

    async def open(self) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        self.pool = ConnectionPool(
            pg_conninfo(self.path), min_size=WRITERS, max_size=WRITERS, kwargs=kwargs
        )
        self.saver = PostgresSaver(self.pool)  # type: ignore[arg-type]
        self.saver.setup()
        self.configs = {k: _config(k) for k in range(WRITERS + 1)}

    async def close(self) -> None:
        self.pool.close()

    async def fill(self, count: int) -> None:
        for n in range(count):
            self.write(WRITERS, n)


class AsyncPgSaverPeer(AsyncSaverPeer):
    name = "AsyncPostgresSaver"

    async def open(self) -> None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        self.apool = AsyncConnectionPool(
            pg_conninfo(self.path), min_size=WRITERS, max_size=WRITERS, kwargs=kwargs, open=False
        )
        await self.apool.open()
        self.asaver = AsyncPostgresSaver(self.apool)  # type: ignore[arg-type]
        await self.asaver.setup()
        self.configs = {k: _config(k) for k in range(WRITERS + 1)}

    async def close(self) -> None:
        await self.apool.close()

    async def fill(self, count: int) -> None:
        for n in range(count):
            await self.write(WRITERS, n)


PEERS = (StorePeer, AsyncStorePeer, SaverPeer, AsyncSaverPeer, SessionPeer)
PG_PEERS = (StorePeer, AsyncStorePeer, PgSaverPeer, AsyncPgSaverPeer)


async def per_call(peer: Peer, call: Callable[[int], Any], count: int) -> float:
    began = time.perf_counter()
    for n in range(count):
        out = call(n)
        if peer.is_async:
            await out
    return (time.perf_counter() - began) / count


async def writers(peer: Peer, seconds: float) -> float:
    if peer.is_async:

        def op(k: int, n: int) -> Awaitable[Any]:
            return peer.write(k, n)  # type: ignore[no-any-return]

        return (await drive_tasks(op, WRITERS, seconds))[0]
    counters = [0] * WRITERS

    def make(k: int) -> Callable[[int], None]:
        def one(n: int) -> None:
            peer.write(k, counters[k] + 10_000_000)
            counters[k] += 1

        return one

    return drive([make(k) for k in range(WRITERS)], seconds)[0]


async def main_async(
    rounds: int, where: Callable[[str], Any], kinds: tuple[type[Peer], ...]
) -> None:
    """`where(name)`: a new SQLite file or PostgreSQL database for one peer's data."""
    peers = [cls(where(cls.name)) for cls in kinds]
    sized = [cls(where(f"size-{cls.name}")) for cls in kinds if cls.name[0] != "A"]
    opened: list[Peer] = []
    try:
        for peer in peers:
            await peer.open()
            opened.append(peer)
            await peer.fill(HISTORY)
        sizes: dict[str, int] = {}
        for peer in sized:
            await peer.open()
            await peer.fill(SIZE_STEPS)
            await peer.close()
            sizes[peer.name] = size_of(peer.path)
        names = [p.name for p in peers]
        figures: dict[str, dict[str, list[float]]] = {
            m: {n: [] for n in names} for m in ("write", "writers", "latest", "history")
        }
        written = [0] * len(peers)
        for r in range(rounds + 1):  # the first round warms up
            order = list(range(len(peers)))
            order = order[r % len(order) :] + order[: r % len(order)]
            for i in order:
                peer = peers[i]
                base = 1_000_000 + written[i]
                write = await per_call(
                    peer, lambda n, p=peer, b=base: p.write(0, b + n), WRITE_CALLS
                )
                written[i] += WRITE_CALLS
                rate = await writers(peer, 0.5)
                latest = await per_call(peer, lambda n, p=peer: p.latest(), 50)
                history = await per_call(peer, lambda n, p=peer: p.history(), 5)
                if r:
                    for m, v in (("write", write), ("writers", rate), ("latest", latest)):
                        figures[m][peer.name].append(v)
                    figures["history"][peer.name].append(history)
    finally:  # an AsyncStore left open keeps its threads, and the process, alive
        for peer in opened:
            await peer.close()
    load = os.getloadavg()[0]
    backend = "SQLite" if isinstance(peers[0].path, Path) else "PostgreSQL"
    print(f"{backend}, each library's defaults; {rounds} rounds, medians; load {load:.1f}, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(
        "| peer | write one step | 8 writers | latest state | history of 1,000 steps "
        "| size after 10,000 steps |"
    )
    print("|---|---|---|---|---|---|")
    for name in names:
        f = {m: statistics.median(figures[m][name]) for m in figures}
        size = sizes.get(name) or sizes.get(name.replace("Async", ""), 0)
        print(
            f"| {name} | {f['write'] * 1e6:.0f} µs | {f['writers']:.0f}/s "
            f"| {f['latest'] * 1e6:.0f} µs | {f['history'] * 1e3:.1f} ms "
            f"| {size / 1e6:.1f} MB |"
        )
    print()
    print("| peer | write one step | 8 writers | latest state | history | (its cost ÷ the Store's,")
    print("|---|---|---|---|---|  median of the rounds' ratios; > 1: the Store is faster)")
    for name in names[1:]:
        cells = []
        for m in ("write", "writers", "latest", "history"):
            pairs = zip(figures[m][name], figures[m]["Store"], strict=True)
            ratios = [(s / p if m == "writers" else p / s) for p, s in pairs]
            cells.append(f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})")
        print(f"| {name} | " + " | ".join(cells) + " |")


class RawPeer(Peer):
    """The Store's own single-write statement (a step row and its checkpoint event, one
    statement in autocommit) sent through psycopg, on tables with primary keys only."""

    name = "raw psycopg"

    async def open(self) -> None:
        import psycopg

        self.conn = psycopg.connect(pg_conninfo(self.path), autocommit=True)
        self.conn.execute(
            "CREATE TABLE steps (id bigserial PRIMARY KEY, run_id bigint, step bigint, "
            "decision text, result text, prompt text, tool_call text, tokens bigint)"
        )
        self.conn.execute(
            "CREATE TABLE checkpoint_events (id bigserial PRIMARY KEY, run_id bigint, "
            "step bigint, kind text, detail text)"
        )

    async def close(self) -> None:
        self.conn.close()

    def write(self, k: int, n: int) -> Any:
        s = step_record(n + 1)
        self.conn.execute(
            "WITH step_row AS (INSERT INTO steps (run_id, step, decision, result, prompt, "
            "tool_call, tokens) VALUES (%s, %s, %s, %s, %s, %s, %s)) INSERT INTO "
            "checkpoint_events (run_id, step, kind, detail) VALUES (%s, %s, 'checkpoint', NULL)",
            (k, s.step, s.decision, s.result, s.prompt, s.tool_call, s.tokens, k, s.step),
        )


async def single_writes(rounds: int, where: Callable[[str], Any], bursts: bool) -> None:
    """One writer on PostgreSQL: the Store, `PostgresSaver` and the raw statement, alternated
    in rounds of `SINGLE_CALLS` writes each (with `bursts`, each peer's writes followed by a
    0.5 s burst of 8 writers, as the peer table runs them)."""
    peers: list[Peer] = [StorePeer(where("single-store")), PgSaverPeer(where("single-saver")),
                         RawPeer(where("single-raw"))]  # fmt: skip
    opened: list[Peer] = []
    try:
        for peer in peers:
            await peer.open()
            opened.append(peer)
        times: dict[str, list[float]] = {p.name: [] for p in peers}
        written = 0
        for r in range(rounds + 1):  # the first round warms up
            for peer in peers:
                took = await per_call(
                    peer, lambda n, p=peer, b=written: p.write(0, b + n), SINGLE_CALLS
                )
                if r:
                    times[peer.name].append(took)
                if bursts and not isinstance(peer, RawPeer):
                    await writers(peer, 0.5)
            written += SINGLE_CALLS
    finally:
        for peer in opened:
            await peer.close()
    options = os.environ.get("PGOPTIONS", "")
    print(f"PostgreSQL, one writer, {rounds} rounds of {SINGLE_CALLS} writes a peer"
          f"{', each followed by a burst of 8 writers' if bursts else ''}; medians; "
          f"load {os.getloadavg()[0]:.1f}; PGOPTIONS={options!r}")  # fmt: skip
    print("| peer | write one step | Store ÷ peer (median of rounds; range) |")
    print("|---|---|---|")
    store = times["Store"]
    for name, series in times.items():
        ratios = [s / p for s, p in zip(store, series, strict=True)]
        shown = "—" if name == "Store" else (
            f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}×)")  # fmt: skip
        print(f"| {name} | {statistics.median(series) * 1e6:.0f} µs | {shown} |")


SINGLE_CALLS = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pg", help="a PostgreSQL server's SQLAlchemy URL: its peers instead")
    parser.add_argument(
        "--single-writes",
        action="store_true",
        help="with --pg: only one writer's writes, the Store beside PostgresSaver and the raw "
        "statement (set PGOPTIONS='-c synchronous_commit=off' to take the commit's flush off)",
    )
    parser.add_argument(
        "--bursts", action="store_true", help="with --single-writes: 8 writers after each peer"
    )
    args = parser.parse_args()
    if args.pg and args.single_writes:
        with ExitStack() as stack:

            def scratch(name: str) -> Any:
                return stack.enter_context(
                    pg_database(args.pg, f"hs_bench_{name.replace('-', '_')}")
                )

            asyncio.run(single_writes(args.rounds, scratch, args.bursts))
        return
    if args.pg:
        with ExitStack() as stack:

            def database(name: str) -> Any:
                db = f"hs_bench_peer_{name.lower().replace('-', '_')}"
                return stack.enter_context(pg_database(args.pg, db))

            asyncio.run(main_async(args.rounds, database, PG_PEERS))
        return
    with tempfile.TemporaryDirectory() as scratch:

        def file(name: str) -> Any:
            return Path(scratch) / f"{name}.sqlite3"

        asyncio.run(main_async(args.rounds, file, PEERS))


if __name__ == "__main__":
    main()
