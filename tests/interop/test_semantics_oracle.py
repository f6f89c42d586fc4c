"""The 0.66 semantics of the Store's 0.13 methods, checked against upstream's own code.

`oracle-0_66` is io-harness 0.66's store compiled into a CLI (see the shared oracle README):
`write PATH` runs a fixed script through upstream's API — memory writes, a pin, approvals,
spawns — and prints what each call returned; `dump PATH` prints everything upstream reads.
Two checks: (1) the same memory writes replayed through harness_store on a copy of one store
evict the same keys in the same order, take the same restore points and leave the same entries;
(2) a store written by harness_store reads through upstream as harness_store reads it (reply
turns, plan pauses, decide-once approvals, spawn names, memory kinds, pins and order).
The binary comes from `interop.oracles` (its cache, or `$HS_ORACLE_BIN`); without cargo these
tests skip locally, and in CI they fail. SQLite only: the oracle opens files.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support.shared import SHARED

from harness_store import MemoryEntry, ResumeError, SpawnRow, StepRecord, Store
from interop import oracles

WS = "/ws/one"  # the workspace the oracle's write script uses


def oracle(command: str, path: Path) -> Any:
    done = subprocess.run(
        [str(oracles.binary(SHARED / "oracle", "0.66")), command, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)


def rust_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def debug_entry(e: MemoryEntry) -> str:
    """A harness_store entry in the Debug form of upstream's `MemoryEntry`."""
    kind = "Decision" if e.kind == "decision" else "Fact"
    return (
        f"MemoryEntry {{ key: {rust_str(e.key)}, value: {rust_str(e.value)}, "
        f"run_id: {e.run_id}, step: {e.step}, created_at: {rust_str(e.created_at)}, "
        f"kind: {kind}, pinned: {str(e.pinned).lower()} }}"
    )


def debug_list(entries: list[MemoryEntry]) -> str:
    return "[" + ", ".join(debug_entry(e) for e in entries) + "]"


def debug_spawn(s: SpawnRow | None) -> str:
    if s is None:
        return "None"
    steps = "None" if s.max_steps is None else f"Some({s.max_steps})"
    return (
        f"Some(SpawnRow {{ child_run_id: {s.child_run_id}, goal: {rust_str(s.goal)}, "
        f"verify_file: {rust_str(s.verify_file)}, needle: {rust_str(s.needle)}, "
        f"max_steps: {steps}, deny_write: {rust_str(s.deny_write)}, "
        f"as_name: {rust_str(s.as_name)} }})"
    )


def keys_of(debug: str) -> list[str]:
    """The keys of a Debug `Vec<String>` (or `MemoryWrite`'s evicted list)."""
    inner = re.search(r"\[(.*)\]", debug)
    assert inner is not None, debug
    return json.loads("[" + inner.group(1) + "]")


def sql(path: Path, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(statement, params).fetchall()


# --- (1) the same writes, upstream's and ours ---------------------------------------------------


def prefill(path: Path) -> None:
    """64 entries in the oracle script's workspace, at 3 chars under the 16,000-char cap, with
    recall evidence that puts every rule of the 0.56 order to work on the script's writes: a
    pin, a never-recalled entry younger than recalled ones, two one-run entries whose last
    recalls reverse their age, three rows of one run against two runs, and a tail by age."""
    Store.open(path).close()
    entries: list[tuple[str, str, str, str | None, int | None]] = [
        ("p_pin", "PP", "2026-01-01T00:00:00.000Z", "fact", 1),
        ("w_two", "a", "2026-01-01T00:00:01.000Z", None, None),
        ("w_one_late", "b", "2026-01-01T00:00:02.000Z", "fact", 0),
        ("w_one_early", "c", "2026-01-01T00:00:03.000Z", "fact", 0),
        ("note", "n", "2026-01-01T00:00:04.000Z", "decision", 0),
        ("z_never", "z", "2026-01-01T00:00:09.000Z", "fact", 0),
    ]
    for i in range(58):
        value = ("s" * 258) if i == 0 else ("s" * 276)
        entries.append((f"s{i:02}", value, f"2026-01-01T00:01:{i:02}.000Z", "fact", 0))
    recalls = [("w_two", 101, "2026-01-02 08:30:00"), ("w_two", 102, "2026-01-02 09:00:00")]
    recalls += [("w_one_late", 103, f"2026-01-02 1{h}:00:00") for h in (0, 1, 2)]
    recalls += [("w_one_early", 104, "2026-01-02 08:00:00")]
    strong = ["note"] + [f"s{i:02}" for i in range(58)]
    recalls += [(k, run, "2026-01-03 00:00:00") for k in strong for run in (105, 106, 107)]
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(
            "INSERT INTO memory (workspace, key, value, run_id, step, created_at, kind, pinned) "
            "VALUES (?, ?, ?, 900, 1, ?, ?, ?)",
            [(WS, *entry) for entry in entries],
        )
        conn.executemany(
            "INSERT INTO memory_recalls (run_id, step, workspace, key, at) VALUES (?, 1, ?, ?, ?)",
            [(run, WS, key, at) for key, run, at in recalls],
        )
    total = sql(path, "SELECT COUNT(*), SUM(LENGTH(value)) FROM memory")[0]
    assert total == (64, 15997)


def test_memory_writes_evict_exactly_what_upstream_evicts(tmp_path: Path) -> None:
    theirs, ours = tmp_path / "theirs.sqlite3", tmp_path / "ours.sqlite3"
    prefill(theirs)
    shutil.copyfile(theirs, ours)

    said = dict((step[0], step[1]) for step in oracle("write", theirs)["transcript"])
    with Store.open(ours) as store:
        root = store.start_run("goal", "NOTES.md")
        assert root == 1  # the script's root run, in an empty runs table
        got = [store.memory_put(WS, "lang", "rust ü", root, 1)]
        got.append(store.memory_put(WS, "db", "sqlite", root, 1))
        sql(ours, "UPDATE memory SET pinned = 1 WHERE workspace = ? AND key = 'lang'", (WS,))
        got.append(store.memory_put(WS, "note", "overwritten", root, 2))
        got.append(store.memory_put(WS, "note", "the note", root, 3))
        ours_list = store.memory_list(WS)
    wanted = [
        keys_of(said[name])
        for name in ("memory_write fact", "memory_write decision", "memory_put", "memory_put again")
    ]
    assert got == wanted
    # The scenario reaches every rule: a pin skipped, the never-recalled first, one-run entries
    # by last recall, distinct runs over rows, and the age tail.
    assert [key for keys in wanted for key in keys] == [
        "z_never",
        "w_one_early",
        "w_one_late",
        "lang",
        "db",
        "w_two",
        "s00",
    ]

    snapshot_sql = (
        "SELECT run_id, key, step, before, kind, state FROM memory_snapshots "
        "WHERE workspace = ? ORDER BY id"
    )
    assert sql(ours, snapshot_sql, (WS,)) == sql(theirs, snapshot_sql, (WS,))

    # What is left reads the same through upstream and through harness_store; only the stamp
    # of the entry both wrote just now differs.
    def unstamped(text: str) -> str:
        return re.sub(r'created_at: "2026-(?!01-01T)[^"]*"', 'created_at: "<now>"', text)

    upstream_list = oracle("dump", theirs)["memory"][WS]["list"]
    assert unstamped(debug_list(ours_list)) == unstamped(upstream_list)
    assert unstamped(oracle("dump", ours)["memory"][WS]["list"]) == unstamped(upstream_list)


# --- (2) a store written here, read by upstream -----------------------------------------------


def test_a_store_written_here_reads_the_same_through_upstream(tmp_path: Path) -> None:
    path = tmp_path / "ours.sqlite3"
    with Store.open(path) as store:
        answering = store.start_run("hi", "f")
        answered = store.start_run("hello", "f")
        planned = store.start_run("plan it", "f")
        for run in (answering, answered, planned):
            store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=7))
        sql(path, "UPDATE runs SET turn_kind = 'reply' WHERE id IN (?, ?)", (answering, answered))
        for run, total in ((answering, 100), (answering, 23), (answered, 40), (planned, 99)):
            sql(
                path,
                "INSERT INTO provider_calls (run_id, step, attempt, provider, total_tokens, "
                "latency_ms) VALUES (?, 0, 1, 'p', ?, 5)",
                (run, total),
            )
        store.finish_run(answered, "success")
        store.finish_run(planned, "awaiting_plan")
        request = store.put_pending(planned, 1, "exec", "cargo test")
        assert store.resolve_pending(request, "approve") is True
        assert store.resolve_pending(request, "deny") is False
        child = store.start_child_run("child", "c.md", planned, 1)
        store.record_spawn(planned, 1, child, "child", "c.md", "ok", 5, "[]", "helper")
        store.record_spawn(planned, 2, child, "unnamed", "c.md", "ok", None, "[]")
        store.memory_put(WS, "lang", "rust ü", planned, 1)
        sql(path, "UPDATE memory SET pinned = 1, kind = 'decision' WHERE key = 'lang'")
        store.memory_put(WS, "lang", "refused", planned, 2)
        for key in ("b", "c", "a"):
            store.memory_put(WS, key, key, planned, 3)
        sql(path, "UPDATE memory SET created_at = '2026-01-01T00:00:00.000Z' WHERE key <> 'lang'")

        dump = oracle("dump", path)
        runs = {r["id"]: r for r in dump["runs"]}
        for run in (answering, answered, planned):
            assert runs[run]["spent_tokens"] == str(store.spent_tokens(run))
        assert [store.spent_tokens(r) for r in (answering, answered, planned)] == [123, 40, 7]
        summary = store.run_summary(answered)
        assert summary is not None and summary.tokens == 40
        assert f"tokens: {summary.tokens}," in runs[answered]["run_summary"]
        assert runs[planned]["status"] == 'Some("paused")' and store.status(planned) == "paused"
        assert runs[planned]["run_summary"] == "None" and store.run_summary(planned) is None

        with pytest.raises(ResumeError) as refused:
            store.check_resumable(answering)
        assert str(refused.value) in runs[answering]["check_resumable"]["error"]
        store.check_resumable(answered)
        assert runs[answered]["check_resumable"] == "()"

        pending = store.pending(request)
        assert pending is not None and pending.resolved == "approve"
        assert f'resolved: Some("{pending.resolved}")' in dump["pending"][0]

        found = {(s["parent_run_id"], s["step"], s["goal"]): s["found"] for s in dump["spawns"]}
        for step, goal in ((1, "child"), (2, "unnamed")):
            ours = debug_spawn(store.find_spawn(planned, step, goal))
            assert found[(planned, step, goal)] == ours

        ours_list = store.memory_list(WS)
        assert [(e.key, e.value, e.kind, e.pinned) for e in ours_list] == [
            ("a", "a", "fact", False),
            ("b", "b", "fact", False),
            ("c", "c", "fact", False),
            ("lang", "rust ü", "decision", True),
        ]
        assert debug_list(ours_list) == dump["memory"][WS]["list"]
        gets = [debug_entry(e) for e in ours_list]
        assert [f"Some({g})" for g in gets] == dump["memory"][WS]["get"]
