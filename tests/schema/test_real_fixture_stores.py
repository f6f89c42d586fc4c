"""Real io-harness stores (written by 0.22.0 and 0.29.0 builds) opened by `Store.open`.

Each fixture in `../shared/fixtures` has a JSON file saying what it holds. Opening a copy
upgrades it in place (it is newer than 0.13: the 0.13 schema plus tables of its own), and then:

* the Store reads back exactly what the JSON says — steps, last step, spend, status, outcome,
  trees, pending approvals, policy events, observations, memory, summaries …;
* nothing of the store is lost: every row of every table it had, including the tables 0.13
  has never heard of, is identical before and after (typed `sqlite3` dumps), as are their
  CREATE texts, indexes, `user_version` and `sqlite_sequence`;
* upstream 0.13's own read SQL answers as it did before the open.

Fixtures are SQLite files, so these tests are SQLite-only by nature.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE_STORES, FIXTURES, in_newest_memory_order
from support import legacy
from support import upstream_sql as up
from support.shared import fixture_missing

from harness_store import CHECKPOINT_FORMAT, RunStatus, StepRecord, Store
from harness_store.errors import UpgradeRequiredError
from harness_store.models.spend import USAGE_SUMS
from harness_store.releases import HEAD, RELEASES

Copy = Callable[[str], Path]


def expected(name: str) -> dict[str, Any]:
    path = FIXTURES / f"{name}.json"
    if not path.exists():
        fixture_missing(path)
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def snapshot(path: Path, columns: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Everything a store holds, read with plain sqlite3: every table's rows with their
    storage classes (SQLite's own `sqlite_sequence` included), the schema, `user_version`.
    `columns` limits the rows to those columns (a store's before a later release added some)."""
    with closing(sqlite3.connect(path)) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        rows = {}
        names = {}
        for table in tables:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            if columns is not None and table in columns:
                cols = columns[table]
            names[table] = cols
            typed = ", ".join(f'typeof("{c}"), "{c}"' for c in cols)
            rows[table] = sorted(
                conn.execute(f'SELECT {typed} FROM "{table}"').fetchall(), key=repr
            )
        return {
            "rows": rows,
            "columns": names,
            "schema": {
                (r[0], r[1]): (r[2], r[3])
                for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
            },
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "iterdump": [
                line
                for line in conn.iterdump()
                if not line.startswith(('INSERT INTO "alembic_version"', "CREATE INDEX hs_"))
                and "alembic_version" not in line
            ],
        }


def run_ids(path: Path) -> list[int]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY id")]


def upstream_answers(path: Path) -> dict[str, Any]:
    """upstream 0.13's reads for every run of the store (and a few memory probes)."""
    with closing(sqlite3.connect(path)) as conn:
        workspaces = [r[0] for r in conn.execute("SELECT DISTINCT workspace FROM memory")]
        answers = legacy.read_answers(conn, "0.13", run_ids(path))
        for ws in workspaces:
            answers[f"memory_list({ws!r})"] = up.read(conn, "memory_list", ws)
        for rid in run_ids(path):
            answers[f"run_summary({rid})"] = up.read(conn, "run_summary", rid)
            answers[f"started_at({rid})"] = up.read(conn, "started_at", rid)
        return answers


def rows_of(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return [tuple(r) for r in conn.execute(sql, args)]


# --- nothing is lost ---------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURE_STORES)
def test_opening_a_real_store_upgrades_it_and_loses_nothing(fixture_copy: Copy, name: str) -> None:
    path = fixture_copy(name)
    before = snapshot(path)
    answers = upstream_answers(path)
    # a newer release's store: 0.13's tables plus its own
    unknown = {
        t
        for t in before["rows"]
        if t not in up.TABLES_0_13 and t not in ("sqlite_sequence", "alembic_version")
    }
    assert unknown, "the fixture should hold tables 0.13 does not know"

    with Store.open(path) as store:
        report: Any = store.upgrade_report
        assert report is not None, "a store without alembic_version is upgraded on open"
        assert report.after == HEAD
        assert report.backup is not None and Path(report.backup).exists()

    after = snapshot(path, before["columns"])
    # every table it had: identical rows, identical storage classes
    for table, rows in before["rows"].items():
        assert after["rows"][table] == rows, f"rows of {table} changed"
    # every schema object it had: identical CREATE text, but for the columns later releases
    # append to a table (ALTER TABLE … ADD COLUMN rewrites only that text)
    grown = {t for r in RELEASES for t in r.new_columns}
    for key, value in before["schema"].items():
        if key[1] in grown:  # its old columns keep their rows, checked above
            assert after["schema"][key][0] == value[0], key
        else:
            assert after["schema"].get(key) == value, f"{key} changed"
    added = set(after["schema"]) - set(before["schema"])
    # and the only new objects are harness_store's revision table and `hs_` indexes, and the
    # tables and indexes of the releases after the fixture's
    later = {n for r in RELEASES for n in (*r.new_tables, *r.new_indexes)}
    assert all(
        n in ("alembic_version", "sqlite_autoindex_alembic_version_1", *later)
        or n.startswith(("hs_", "sqlite_autoindex_"))
        for t, n in added
    ), sorted(added)
    assert after["user_version"] == before["user_version"] == CHECKPOINT_FORMAT

    # the SQL dump of every table no later release grew is line for line the same
    # (harness_store's own `hs_` tables are new, and `hs3` fills its counters from the rows)
    def rows_of_kept(dump: list[str]) -> list[str]:
        return [
            line
            for line in dump
            if line.startswith("INSERT INTO")
            and line.split('"')[1] not in grown
            and not line.split('"')[1].startswith("hs_")
            and "sqlite_sequence" not in line
        ]

    assert rows_of_kept(after["iterdump"]) == rows_of_kept(before["iterdump"])
    # and upstream's own reads answer exactly as before
    assert upstream_answers(path) == answers

    # a second open has nothing left to do and still changes nothing
    with Store.open(path) as store:
        assert store.upgrade_report is None
    assert snapshot(path, before["columns"])["rows"] == after["rows"]


@pytest.mark.parametrize("name", ["io-harness-0.22.0/populated", "io-harness-0.29.0/interrupted"])
def test_writing_to_an_upgraded_real_store_leaves_its_own_tables_alone(
    fixture_copy: Copy, name: str
) -> None:
    path = fixture_copy(name)
    taken = snapshot(path)
    before = taken["rows"]
    old_runs = run_ids(path)
    with Store.open(path) as store:
        run = store.start_run("a run written by harness_store", "ws")
        store.checkpoint_step(run, StepRecord(1, "act", "ok", "p", "", 42))
        store.memory_put("ws", "k", "v", run, 1)
        store.finish_run(run, "success")
        assert store.runs() == [run, *reversed(old_runs)]
    after = snapshot(path, taken["columns"])["rows"]
    unchanged = [t for t in before if t not in ("runs", "steps", "checkpoint_events", "memory",
                                                "run_outcomes", "sqlite_sequence")]  # fmt: skip
    for table in unchanged:
        assert after[table] == before[table], table
    # the new rows are upstream-readable next to the old ones
    assert up.read_at(str(path), "steps", run) == [(1, "act", "ok", "p", "", 42)]
    assert up.read_at(str(path), "run_summary", run)[0][:5] == (run, "success", 1, 1, 42)
    assert run > max(old_runs)


@pytest.mark.parametrize("name", FIXTURE_STORES)
def test_a_real_store_opened_without_upgrade_is_refused_unchanged(
    fixture_copy: Copy, name: str
) -> None:
    path = fixture_copy(name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(UpgradeRequiredError) as info:
        Store.open(path, upgrade=False)
    assert "harness-store upgrade" in str(info.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".bak")]


# --- what the JSON says -------------------------------------------------------------------


def test_populated_reads_back_what_its_json_says(fixture_copy: Copy) -> None:
    name = "io-harness-0.22.0/populated"
    want = expected(name)
    path = fixture_copy(name)
    run = want["run_id"]
    with Store.open(path) as store:
        steps = store.steps(run)
        assert [{"decision": s.decision, "step": s.step, "tokens": s.tokens} for s in steps] == (
            want["steps"]
        )
        assert len(steps) == want["step_count"]
        assert store.last_step(run) == want["last_step"]
        assert store.spent_tokens(run) == want["spent_tokens"]
        assert store.status(run) == want["status"]
        assert store.run_status(run) is RunStatus(want["status"])
        assert store.outcome(run) == want["outcome"]
        assert store.runs() == [run] and store.last_run() == run
        assert len(store.checkpoint_events(run)) == want["checkpoint_event_count"]
        assert all(
            e.kind == "checkpoint" and e.detail is None for e in store.checkpoint_events(run)
        )
        assert [asdict(e) for e in store.events(run)] == want["policy_events"]
        observations = [
            {"kind": o.kind.value, "step": o.step, "target": o.target}
            for o in store.observations(run)
        ]
        assert observations == want["observations"]
        p = store.pending(want["pending"]["request_id"])
        assert p is not None
        assert {
            "act": p.act,
            "content": p.content,
            "request_id": p.id,
            "resolved": p.resolved,
            "run_id": p.run_id,
            "step": p.step,
            "target": p.target,
        } == want["pending"]
        summary = store.run_summary(run)
        assert summary is not None
        assert summary.outcome == want["outcome"] and summary.success is True
        assert (summary.steps, summary.tokens) == (want["last_step"], want["spent_tokens"])
        assert summary.duration_ms is not None and summary.duration_ms >= 0
        policy = store.run_policy(run)
        assert policy is not None and isinstance(policy.get("layers"), list)
        assert store.canonical_trace(run) == upstream_trace(path, run)
        assert [n.goal for n in store.tree(run)] == [want["goal"]]
        check_tree_agrees(store, run)

    # its own tables (unknown to 0.13) still say what the JSON says after the open
    calls = rows_of(
        path,
        "SELECT step, attempt, provider, model, finish_reason, failure, prompt_tokens, "
        "completion_tokens, total_tokens, cache_read_tokens, cache_write_tokens, "
        "reasoning_tokens, server_tool_requests FROM provider_calls WHERE run_id = ? ORDER BY id",
        run,
    )
    assert calls == [
        (
            c["step"],
            c["attempt"],
            c["provider"],
            c["model"],
            c["finish_reason"],
            c["failure"],
            *(c["usage"][k] for k in USAGE_SUMS),
        )
        for c in want["provider_calls"]
    ]
    assert rows_of(
        path, "SELECT url, title, cited_text FROM citations WHERE run_id = ? ORDER BY id", run
    ) == [(c["url"], c["title"], c["cited_text"]) for c in want["citations"]]
    assert rows_of(
        path,
        "SELECT provider, tool, error FROM server_tool_calls WHERE run_id = ? ORDER BY id",
        run,
    ) == [(c["provider"], c["tool"], c["error"]) for c in want["server_tool_calls"]]
    assert rows_of(
        path,
        "SELECT step, tool, path, lines_added, lines_removed FROM edits WHERE run_id = ? "
        "ORDER BY id",
        run,
    ) == [
        (e["step"], e["tool"], e["path"], e["lines_added"], e["lines_removed"])
        for e in want["edits"]
    ]
    assert rows_of(path, "SELECT file FROM runs WHERE id = ?", run) == [(want["workspace"],)]


@pytest.mark.parametrize("name", ["io-harness-0.22.0/interrupted", "io-harness-0.29.0/interrupted"])
def test_interrupted_tree_reads_back_what_its_json_says(fixture_copy: Copy, name: str) -> None:
    want = expected(name)
    path = fixture_copy(name)
    root = want["root_run_id"]
    with Store.open(path) as store:
        assert store.tree_run_ids(root) == want["tree_run_ids"]
        assert store.spent_tokens_tree(root) == want["spent_tokens_tree"]
        assert store.agent_count_tree(root) == want.get(
            "agent_count_tree", len(want["tree_run_ids"])
        )
        assert store.last_step(root) == want["root_last_step"]
        assert store.outcome(root) == want["root_outcome"]
        assert store.status(root) == want["root_status"]
        assert store.parent(root) is None and store.depth(root) == 0
        assert store.children(root) == [c["run_id"] for c in want["children"]]
        for child in want["children"]:
            rid = child["run_id"]
            assert store.parent(rid) == root
            assert store.depth(rid) == child["depth"]
            assert store.last_step(rid) == child["last_step"]
            assert store.outcome(rid) == child["outcome"]
            assert store.spent_tokens(rid) == child["spent_tokens"]
            assert store.status(rid) == child["status"]
            summary = store.run_summary(rid)
            assert summary is not None
            assert (summary.outcome, summary.success) == (
                child["outcome"],
                child["outcome"] == "success",
            )
            assert (summary.steps, summary.tokens) == (child["last_step"], child["spent_tokens"])
            # each child was spawned by the root: the adopt-on-resume lookup finds it
            spawns = [e for e in store.agent_events(root) if e.child_run_id == rid]
            assert len(spawns) == 1 and spawns[0].kind == "spawn"
            found = store.find_spawn(root, spawns[0].step, spawns[0].detail or "")
            assert found is not None and found.child_run_id == rid
            # the files it wrote, in its ledger (0.13) and in the newer `edits` table
            wrote = [o.target for o in store.observations(rid) if o.kind.value == "write"]
            assert wrote == child["wrote"]
            assert [
                r[0]
                for r in rows_of(path, "SELECT path FROM edits WHERE run_id = ? ORDER BY id", rid)
            ] == child["wrote"]
        nodes = store.tree(root)
        assert [(n.run_id, n.parent_run_id, n.depth) for n in nodes] == [
            (root, None, 0),
            *((c["run_id"], root, c["depth"]) for c in want["children"]),
        ]
        check_tree_agrees(store, root)
        for rid in want["tree_run_ids"]:
            store.check_resumable(rid)
            files = rows_of(path, "SELECT file FROM runs WHERE id = ?", rid)
            assert files == [(want["workspace"],)]


def test_deferred_approval_reads_back_what_its_json_says(fixture_copy: Copy) -> None:
    name = "io-harness-0.22.0/deferred-approval"
    want = expected(name)
    path = fixture_copy(name)
    run = want["run_id"]
    with Store.open(path) as store:
        assert store.last_step(run) == want["last_step"]
        assert store.outcome(run) == want["outcome"]
        assert store.status(run) == want["status"]
        assert store.run_status(run) is RunStatus.PAUSED
        assert store.run_summary(run) is None, "a paused run has no summary"
        p = store.pending(want["request_id"])
        assert p is not None
        assert (p.id, p.run_id, p.step, p.act, p.target, p.content, p.resolved) == (
            want["pending"]["request_id"],
            want["pending"]["run_id"],
            want["pending"]["step"],
            want["pending"]["act"],
            want["pending"]["target"],
            want["pending"]["content"],
            want["pending"]["resolved"],
        )
        store.check_resumable(run)
        # the human decides, the run resumes and finishes: written in upstream's formats
        store.resolve_pending(p.id, "approve")
        store.checkpoint_step(run, StepRecord(2, "wrote out.txt", "ok", "", "", 3))
        store.finish_run(run, "success")
    assert up.read_at(str(path), "pending", want["request_id"])[0][-1] == "approve"
    (summary,) = up.read_at(str(path), "run_summary", run)
    spent = up.read_at(str(path), "spent_tokens", run)[0][0]
    assert summary[:5] == (run, "success", 1, 2, spent)


def test_aggregates_read_back_what_its_json_says(fixture_copy: Copy) -> None:
    name = "io-harness-0.29.0/aggregates"
    want = expected(name)
    composition, read_back = want["composition"], want["read_back"]
    path = fixture_copy(name)
    with Store.open(path) as store:
        assert store.runs() == sorted(composition["run_ids"], reverse=True)
        assert len(store.runs()) == composition["runs"]
        assert store.last_run() == max(composition["run_ids"])
        summaries = {rid: store.run_summary(rid) for rid in composition["run_ids"]}
        assert all(s is not None for s in summaries.values())
        assert Counter(s.outcome for s in summaries.values() if s) == composition["by_outcome"]
        assert sum(1 for s in summaries.values() if s and s.success) == composition["succeeded"]

        gates: dict[int, list[str]] = {}
        for run in read_back["runs"]:
            rid = run["run_id"]
            summary = summaries[rid]
            assert summary is not None
            assert (summary.outcome, summary.success, summary.tokens) == (
                run["outcome"],
                run["success"],
                run["tokens"],
            )
            assert store.outcome(rid) == run["outcome"]
            assert store.spent_tokens(rid) == run["tokens"]
            assert [e.kind for e in store.context_events(rid)] == run["context_kinds"]
            gates[rid] = [
                e.detail or "" for e in store.sandbox_events(rid) if e.kind == "gate_phase_failed"
            ]
            assert gates[rid] == run["gate_failures"]
            resumes = [e for e in store.checkpoint_events(rid) if e.kind == "resume"]
            assert len(resumes) == run["resumes"]
        assert (
            Counter(g for v in gates.values() for g in v) == composition["gate_failures_by_phase"]
        )
        verified_first_try = [
            rid for rid, s in summaries.items() if s and s.success and not gates[rid]
        ]
        assert len(verified_first_try) == composition["verified_first_try"]

        kinds = Counter(e.kind for rid in composition["run_ids"] for e in store.context_events(rid))
        assert kinds["served"] == composition["recovery"]["fallbacks"]
        assert kinds["replan"] == composition["recovery"]["replans"]
        assert (
            sum(
                e.kind == "resume"
                for rid in composition["run_ids"]
                for e in store.checkpoint_events(rid)
            )
            == composition["recovery"]["resumes"]
        )

        workspace = composition["workspace"]
        memory = store.memory_list(workspace)
        newest = in_newest_memory_order(name, workspace, read_back["memory"])
        assert sorted(e.key for e in memory) == sorted(composition["memory_keys"])
        assert [
            {"key": e.key, "run_id": e.run_id, "step": e.step, "value": e.value} for e in memory
        ] == newest
        for entry in read_back["memory"]:
            got = store.memory_get(workspace, entry["key"])
            assert got is not None and got.value == entry["value"]
        assert store.memory_list(workspace + "/") == []

        # a memory write into the real workspace follows upstream's caps and ordering
        assert store.memory_put(workspace, "new-note", "x", 7, 1) == []
        assert [e.key for e in store.memory_list(workspace)] == [
            *(e["key"] for e in newest),
            "new-note",
        ]


def upstream_trace(path: Path, run: int) -> str:
    """upstream's canonical trace text, built from upstream's own reads of the file."""
    with closing(sqlite3.connect(path)) as conn:
        steps = up.read(conn, "steps", run)
        context = up.read(conn, "context_events", run)
    return "".join(
        f"step {s} | tokens {t} | decision {d} | tool_call {c} | prompt {p} | result {r}\n"
        for s, d, r, p, c, t in steps
    ) + "".join(f"context {s} | {k} | {d or ''}\n" for s, k, d, _, _ in context)


def check_tree_agrees(store: Store, root: int) -> None:
    """`tree()` against the upstream aggregates of the same store."""
    nodes = store.tree(root)
    assert [n.run_id for n in nodes] == store.tree_run_ids(root)
    assert sum(n.tokens for n in nodes) == store.spent_tokens_tree(root)
    assert len(nodes) == store.agent_count_tree(root)
    for n in nodes:
        assert n.steps == store.last_step(n.run_id)
        assert n.tokens == store.spent_tokens(n.run_id)
        assert n.status == store.status(n.run_id)
        assert n.outcome == store.outcome(n.run_id)


def test_reading_an_original_fixture_leaves_no_file_beside_it() -> None:
    """The shared fixtures are read-only, but root ignores that: a plain read-only open of a
    WAL store creates `-wal`/`-shm` beside it, which every later copy then picks up."""
    name = "io-harness-0.29.0/aggregates"
    source = FIXTURES / f"{name}.sqlite3"
    if not source.exists():
        fixture_missing(source)
    beside = [source.with_name(source.name + suffix) for suffix in ("-wal", "-shm")]
    before = [p.exists() for p in beside]
    in_newest_memory_order(name, "/any/workspace", [])
    assert [p.exists() for p in beside] == before == [False, False]
