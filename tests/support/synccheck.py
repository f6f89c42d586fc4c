"""Helpers of the sync tests: source stores written through `Store`, and the check that a
destination holds exactly each origin's rows, every link remapped."""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from harness_store import Store
from harness_store.engine import make_engine, read_only_url
from harness_store.models import Base, table_of
from harness_store.models.sync import IDS, ORIGINS
from harness_store.records import StepRecord
from harness_store.sync import RULES, list_origins, sync
from harness_store.sync.rows import event_json_for
from harness_store.sync.rules import RUNS, SESSIONS, TURNS

from .new_stores import new_sqlite_store

REFERENCED = (RUNS, SESSIONS, TURNS)


def row_count(dest: str, model: type) -> int:
    """How many rows of `model`'s table the store at `dest` holds, read on a read-only engine."""
    engine = make_engine(read_only_url(dest))
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(table_of(model))).scalar_one())
    finally:
        engine.dispose()


def write_source(path: Path, *, runs: int = 3, steps: int = 5, tag: str = "") -> list[int]:
    """A store with `runs` root runs, each with a child, `steps` steps apiece, a pending
    approval, memory and a finished outcome for all but the last root; the root ids. A new
    store starts as a copy of the process's new one (`new_sqlite_store`)."""
    roots = []
    with Store.open(new_sqlite_store(path), synchronous="normal") as store:
        for n in range(runs):
            root = store.start_run(f"goal {tag}{n}", f"/src/{tag}{n}.rs")
            child = store.start_child_run(f"child {tag}{n}", "/src/c.rs", root, 1)
            store.checkpoint_steps(
                root,
                [
                    StepRecord.new(i, f"d{tag}{n}.{i}", "ok").with_trace("p", "t", i)
                    for i in range(1, steps + 1)
                ],
            )
            store.checkpoint_steps(child, [StepRecord.new(1, "c", "ok").with_trace("p", "t", 7)])
            store.put_pending(root, 1, "write", f"/tmp/{tag}{n}", "x")
            store.memory_put("/ws", f"k{tag}{n}", f"v{n}", root, 1)
            store.finish_run(child, "success")
            if n < runs - 1:
                store.finish_run(root, "success")
            roots.append(root)
    return roots


def synced_pair(directory: Path, target: str | Path) -> list[Path]:
    """Two small sources (`write_source`: two roots of three steps, tagged s0 and s1) in
    `directory`, synced into `target`; the sources."""
    sources = [directory / "a.sqlite3", directory / "b.sqlite3"]
    for n, path in enumerate(sources):
        write_source(path, runs=2, steps=3, tag=f"s{n}")
    sync(sources, target)
    return sources


def add_session(path: Path, run_ids: list[int]) -> int:
    """A session whose turns are `run_ids` (a chain), written with upstream's statements."""
    with closing(sqlite3.connect(path)) as conn, conn:
        session = conn.execute("INSERT INTO sessions (root) VALUES ('/ws')").lastrowid
        parent = None
        for run in run_ids:
            parent = conn.execute(
                "INSERT INTO session_turns (session_id, parent_turn_id, run_id, prompt) "
                "VALUES (?, ?, ?, 'hi')",
                (session, parent, run),
            ).lastrowid
            conn.execute("UPDATE sessions SET head_turn_id = ? WHERE id = ?", (parent, session))
        assert session is not None
        return session


def _maps(conn: Any, origin_id: int) -> dict[str, dict[int, int]]:
    maps: dict[str, dict[int, int]] = {t: {} for t in REFERENCED}
    rows = conn.execute(
        select(IDS.c.tbl, IDS.c.src_id, IDS.c.dest_id).where(
            IDS.c.origin_id == origin_id, IDS.c.tbl.in_(REFERENCED), IDS.c.hash.is_not(None)
        )
    )
    for tbl, src, dest in rows:
        maps[tbl][int(src)] = int(dest)
    return maps


def _source_rows(path: Path, table: str) -> tuple[list[str], list[dict[str, Any]]]:
    still = "&immutable=1" if not os.access(path.parent, os.W_OK) else ""  # read-only media
    with closing(sqlite3.connect(f"file:{path}?mode=ro{still}", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if not have:
            return [], []
        rows = [dict(r) for r in conn.execute(f"SELECT * FROM {table}")]
    return sorted(have), rows


def mirror_problems(dest: str, source: Path, *, skip: tuple[str, ...] = ("memory",)) -> list[str]:
    """Every way the destination's rows of `source`'s origin differ from the source's rows
    (empty: an exact mirror, links remapped). Memory is skipped by default: one (workspace,
    key) is held once centrally, whichever origin wrote it last."""
    problems: list[str] = []
    resolved = str(source.resolve())
    matching = [o for o in list_origins(dest) if o.path == resolved]
    if len(matching) != 1:
        return [f"{len(matching)} origins for {resolved}"]
    engine = make_engine(read_only_url(dest))
    try:
        with engine.connect() as conn:
            origin_id = conn.execute(
                select(ORIGINS.c.id).where(ORIGINS.c.uuid == matching[0].uuid)
            ).scalar_one()
            maps = _maps(conn, origin_id)
            dest_runs = set(maps[RUNS].values())
            for rule in RULES:
                if rule.table in skip:
                    continue
                table = Base.metadata.tables[rule.table]
                have, rows = _source_rows(source, rule.table)
                if not have:
                    continue
                keep = [c for c in have if not (c == "id" and rule.key == "id")]
                want: Counter[tuple[Any, ...]] = Counter()
                for row in rows:
                    for column, target in rule.links.items():
                        if row.get(column) is not None:
                            row[column] = maps[target].get(row[column], ("unmapped", row[column]))
                    if rule.table == "run_events":
                        row["json"] = event_json_for(row["json"], maps[RUNS])
                    want[tuple(row[c] for c in keep)] += 1
                if rule.table in REFERENCED:
                    scope = table.c.id.in_(maps[rule.table].values())
                else:
                    assert rule.run_column is not None
                    scope = table.c[rule.run_column].in_(dest_runs)
                got = Counter(
                    tuple(r) for r in conn.execute(select(*(table.c[c] for c in keep)).where(scope))
                )
                if got != want:
                    problems.append(
                        f"{rule.table}: missing {list((want - got).elements())[:3]}, "
                        f"extra {list((got - want).elements())[:3]}"
                    )
    finally:
        engine.dispose()
    return problems
