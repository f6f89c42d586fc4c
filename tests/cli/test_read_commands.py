"""`runs`, `trace`, `tree` and `memory` against the fixtures' JSON and legacy stores, and every
read command leaving the store's bytes as they were."""

from __future__ import annotations

import sqlite3
import unicodedata
from contextlib import closing
from pathlib import Path

import pytest
from support import legacy
from support.clirun import run_in_process
from support.shared import in_newest_memory_order

from harness_store import Store
from harness_store.cli.output import visible

from .commandkit import (
    EXIT_NOT_A_STORE,
    EXIT_NOT_FOUND,
    Copy,
    as_json,
    assert_read_only_url_refuses,
    digest,
    fails,
    fixture_json,
    ok,
    sql,
)

# --- read commands never write -----------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["runs"], ["trace", "1"], ["tree", "1"], ["memory", "interrupted-workspace"]],
    ids=lambda c: c[0],
)
def test_read_commands_leave_the_store_unchanged(fixture_copy: Copy, command: list[str]) -> None:
    path = fixture_copy("io-harness-0.22.0/interrupted")
    before = digest(path)
    ok(command[0], path, *command[1:])
    as_json(command[0], path, *command[1:])
    assert digest(path) == before
    assert sql(path, "SELECT name FROM sqlite_master WHERE name = 'alembic_version'") == []


@pytest.mark.parametrize("command", [["runs"], ["trace", "1"], ["tree", "1"], ["memory", "w"]])
def test_read_commands_refuse_an_older_store(born_05: Path, command: list[str]) -> None:
    before = digest(born_05)
    line = fails(EXIT_NOT_A_STORE, command[0], born_05, *command[1:])
    assert "io-harness 0.5 store" in line and f"harness-store upgrade {born_05}" in line
    assert digest(born_05) == before


def test_read_commands_refuse_a_torn_store(torn: Path) -> None:
    before = digest(torn)
    assert "torn open of 0.7" in fails(EXIT_NOT_A_STORE, "runs", torn)
    assert digest(torn) == before


def test_read_only_url_refuses_writes(fixture_copy: Copy) -> None:
    assert_read_only_url_refuses(fixture_copy("io-harness-0.22.0/populated"), "readonly")


# --- runs, trace, tree, memory against the fixtures' JSON --------------------------------


@pytest.mark.parametrize("release", ["0.22.0", "0.29.0"])
def test_runs_of_the_interrupted_tree(fixture_copy: Copy, release: str) -> None:
    name = f"io-harness-{release}/interrupted"
    facts = fixture_json(name)
    rows = as_json("runs", fixture_copy(name))
    assert [r["run_id"] for r in rows] == sorted(facts["tree_run_ids"], reverse=True)
    by_id = {r["run_id"]: r for r in rows}
    for child in facts["children"]:
        row = by_id[child["run_id"]]
        assert row["parent_run_id"] == facts["root_run_id"]
        assert (row["status"], row["outcome"]) == (child["status"], child["outcome"])
        assert (row["steps"], row["tokens"]) == (child["last_step"], child["spent_tokens"])
    root = by_id[facts["root_run_id"]]
    assert (root["status"], root["outcome"], root["steps"]) == (
        facts["root_status"],
        facts["root_outcome"],
        facts["root_last_step"],
    )
    assert sum(r["tokens"] for r in rows) == facts["spent_tokens_tree"]
    assert all(r["duration_ms"] is not None and r["started_at"] for r in rows)


def test_runs_plain_is_one_line_a_run_newest_first(fixture_copy: Copy) -> None:
    lines = ok("runs", fixture_copy("io-harness-0.22.0/interrupted")).splitlines()
    assert lines[0].split()[:9] == [
        "id",
        "parent",
        "status",
        "outcome",
        "steps",
        "tokens",
        "started",
        "(UTC)",
        "took",
    ]
    assert [line.split()[0] for line in lines[1:]] == ["3", "2", "1"]


def test_runs_shows_each_start_in_utc_whatever_its_spelling(tmp_path: Path) -> None:
    """Under "started (UTC)" a stamp written with an offset (another writer's) is converted to
    UTC, not shown with its offset cut; both of upstream's spellings read alike."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        runs = [store.start_run(f"goal {i}", "f") for i in range(3)]
    starts = ["2026-12-07T03:00:00+05:00", "2026-12-07 06:51:00", "2026-12-07T06:52:00.123Z"]
    with closing(sqlite3.connect(path)) as conn, conn:
        for run, started in zip(runs, starts, strict=True):
            conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (started, run))
    lines = ok("runs", path).splitlines()
    shown = {line.split()[0]: line for line in lines[1:]}
    assert "2026-12-06 22:00:00" in shown[str(runs[0])]
    assert "2026-12-07 06:51:00" in shown[str(runs[1])]
    assert "2026-12-07 06:52:00" in shown[str(runs[2])]


def test_runs_filter_by_status(fixture_copy: Copy) -> None:
    name = "io-harness-0.22.0/deferred-approval"
    facts = fixture_json(name)
    path = fixture_copy(name)
    paused = as_json("runs", path, "--status", "paused")
    assert [r["run_id"] for r in paused] == [facts["run_id"]]
    assert paused[0]["outcome"] == facts["outcome"] and paused[0]["duration_ms"] is None
    assert as_json("runs", path, "--status", "running") == []
    done = run_in_process("runs", path, "--status", "running")
    assert done.returncode == 0 and done.stdout == "" and "no runs" in done.stderr


def test_runs_lines_stay_single_lines_with_awkward_text(born_013: Path) -> None:
    count = sql(born_013, "SELECT COUNT(*) FROM runs")[0][0]
    lines = ok("runs", born_013).splitlines()
    assert len(lines) == count + 1
    for line in lines:
        assert not any(unicodedata.category(c) == "Cc" for c in line), repr(line)
    rows = as_json("runs", born_013)
    goals = dict(sql(born_013, "SELECT id, goal FROM runs"))
    assert {r["run_id"]: r["goal"] for r in rows} == goals


@pytest.mark.parametrize("release", ["0.22.0", "0.29.0"])
def test_tree_matches_the_fixture(fixture_copy: Copy, release: str) -> None:
    name = f"io-harness-{release}/interrupted"
    facts = fixture_json(name)
    path = fixture_copy(name)
    tree = as_json("tree", path, str(facts["root_run_id"]))
    assert tree["run_ids"] == facts["tree_run_ids"]
    assert tree["tokens"] == facts["spent_tokens_tree"]
    assert tree["runs"] == facts.get("agent_count_tree", len(facts["tree_run_ids"]))
    nodes = {n["run_id"]: n for n in tree["nodes"]}
    assert nodes[facts["root_run_id"]]["children"] == [c["run_id"] for c in facts["children"]]
    for child in facts["children"]:
        node = nodes[child["run_id"]]
        assert (node["depth"], node["status"], node["outcome"]) == (
            child["depth"],
            child["status"],
            child["outcome"],
        )
        assert (node["steps"], node["tokens"]) == (child["last_step"], child["spent_tokens"])
    out = ok("tree", path, str(facts["root_run_id"]))
    assert "├── run 2" in out and "└── run 3" in out
    assert f"{len(facts['tree_run_ids'])} runs" in out and "400 tokens" in out
    subtree = as_json("tree", path, "2")
    assert subtree["run_ids"] == [2] and subtree["tokens"] == 80


def test_tree_on_a_terminal_is_drawn_by_rich(fixture_copy: Copy) -> None:
    done = run_in_process(
        "tree", fixture_copy("io-harness-0.22.0/interrupted"), "1", env={"FORCE_COLOR": "1"}
    )
    assert done.returncode == 0
    assert "\x1b[" in done.stdout and "run 3" in done.stdout


def test_tree_of_legacy_roots(born_013: Path) -> None:
    for (root,) in sql(born_013, "SELECT id FROM runs WHERE parent_run_id IS NULL"):
        ids = [
            r[0]
            for r in sql(
                born_013,
                "WITH RECURSIVE t(id) AS (SELECT ? UNION SELECT r.id FROM runs r JOIN t "
                "ON r.parent_run_id = t.id) SELECT id FROM t ORDER BY id",
                root,
            )
        ]
        marks = ",".join("?" * len(ids))
        query = f"SELECT COALESCE(SUM(tokens), 0) FROM steps WHERE run_id IN ({marks})"
        tokens = sql(born_013, query, *ids)[0][0]
        tree = as_json("tree", born_013, str(root))
        assert (tree["run_ids"], tree["tokens"]) == (ids, tokens)


def test_trace_matches_the_populated_fixture(fixture_copy: Copy) -> None:
    name = "io-harness-0.22.0/populated"
    facts = fixture_json(name)
    trace = as_json("trace", fixture_copy(name), str(facts["run_id"]))
    assert (trace["status"], trace["outcome"], trace["goal"]) == (
        facts["status"],
        facts["outcome"],
        facts["goal"],
    )
    assert trace["tokens"] == facts["spent_tokens"]
    entries = trace["entries"]
    assert [e["step"] for e in entries] == sorted(e["step"] for e in entries)
    steps = [e for e in entries if e["type"] == "step"]
    assert [{k: s[k] for k in ("decision", "step", "tokens")} for s in steps] == facts["steps"]
    assert all(s["tool_call"] for s in steps)
    policy = [{k: v for k, v in e.items() if k != "type"} for e in entries if e["type"] == "policy"]
    assert policy == facts["policy_events"]
    (approval,) = [e for e in entries if e["type"] == "approval"]
    pending = facts["pending"]
    assert approval["request_id"] == pending["request_id"]
    for key in ("act", "target", "content", "resolved", "step"):
        assert approval[key] == pending[key]
    checkpoints = [e for e in entries if e["type"] == "checkpoint"]
    assert len(checkpoints) == facts["checkpoint_event_count"]
    # Within a step: the refusal and the provider's answer before the step row, the checkpoint
    # after it.
    step_two = [e["type"] for e in entries if e["step"] == 2]
    assert step_two == ["policy", "call", "step", "checkpoint"]


def test_trace_shows_a_pending_approval(fixture_copy: Copy) -> None:
    name = "io-harness-0.22.0/deferred-approval"
    facts = fixture_json(name)
    path = fixture_copy(name)
    trace = as_json("trace", path, str(facts["run_id"]))
    (approval,) = [e for e in trace["entries"] if e["type"] == "approval"]
    assert approval["resolved"] is None and approval["target"] == facts["pending"]["target"]
    out = ok("trace", path, str(facts["run_id"]))
    assert "approval #1 write out.txt: pending" in out


def test_trace_shows_resume_events(fixture_copy: Copy) -> None:
    path = fixture_copy("io-harness-0.29.0/aggregates")
    (run_id,) = sql(path, "SELECT run_id FROM checkpoint_events WHERE kind = 'resume' LIMIT 1")[0]
    trace = as_json("trace", path, str(run_id))
    kinds = [e["kind"] for e in trace["entries"] if e["type"] == "checkpoint"]
    assert "resume" in kinds
    assert "resume" in ok("trace", path, str(run_id))


def test_memory_matches_the_aggregates_fixture(fixture_copy: Copy) -> None:
    name = "io-harness-0.29.0/aggregates"
    facts = fixture_json(name)
    path = fixture_copy(name)
    workspace = facts["composition"]["workspace"]
    doc = as_json("memory", path, workspace)
    assert doc["workspace"] == workspace
    assert [
        {k: e[k] for k in ("key", "run_id", "step", "value")} for e in doc["entries"]
    ] == in_newest_memory_order(name, workspace, facts["read_back"]["memory"])
    out = ok("memory", path, workspace)
    for key in facts["composition"]["memory_keys"]:
        assert key in out
    done = run_in_process("memory", path, "/elsewhere")
    assert done.returncode == 0 and done.stdout == ""
    assert "no memory entries" in done.stderr and workspace in done.stderr
    assert as_json("memory", path, "/elsewhere")["entries"] == []


def test_memory_of_an_awkward_workspace(born_013: Path) -> None:
    workspace = legacy.WORKSPACES[1]
    expected = sql(
        born_013,
        "SELECT key, value FROM memory WHERE workspace = ? ORDER BY created_at, id",
        workspace,
    )
    doc = as_json("memory", born_013, workspace)
    assert [(e["key"], e["value"]) for e in doc["entries"]] == expected


def test_memory_shows_kind_and_pinned(tmp_path: Path, born_013: Path) -> None:
    """0.30's `kind` and `pinned` in `--json` and in the table; a 0.13 store, which has
    neither column, reads as upstream reads it: facts, none pinned."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f")
        store.memory_put("ws", "plain", "a fact", run, 1)
        store.memory_put("ws", "chosen", "a decision", run, 2)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE memory SET kind = 'decision', pinned = 1 WHERE key = 'chosen'")
    entries = {e["key"]: e for e in as_json("memory", path, "ws")["entries"]}
    assert {k: (e["kind"], e["pinned"]) for k, e in entries.items()} == {
        "plain": ("fact", False),
        "chosen": ("decision", True),
    }
    lines = ok("memory", path, "ws").splitlines()
    header = lines[0].split()
    assert header[:3] == ["key", "kind", "pinned"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.strip()}
    assert rows["chosen"][1:3] == ["decision", "pinned"]
    assert rows["plain"][1] == "fact" and rows["plain"][2] != "pinned"
    old = as_json("memory", born_013, legacy.WORKSPACES[1])["entries"]
    assert old and {(e["kind"], e["pinned"]) for e in old} == {("fact", False)}


@pytest.mark.parametrize("command", ["trace", "tree"])
def test_unknown_run_is_exit_5(fixture_copy: Copy, command: str) -> None:
    line = fails(EXIT_NOT_FOUND, command, fixture_copy("io-harness-0.22.0/populated"), "42")
    assert "no run with id 42" in line


def test_trace_text_shows_each_steps_result(fixture_copy: Copy) -> None:
    """The text left out what each step came to; every step's line shows its result, as the
    JSON holds it (on a terminal a long one is cut like any text)."""
    name = "io-harness-0.22.0/populated"
    path = fixture_copy(name)
    run = str(fixture_json(name)["run_id"])
    steps = [e for e in as_json("trace", path, run)["entries"] if e["type"] == "step"]
    lines = [line for line in ok("trace", path, run).splitlines()[2:] if line.split()[1] == "step"]
    assert len(lines) == len(steps)
    for line, step in zip(lines, steps, strict=True):
        shown = visible(step["result"])  # a line break shown as \n, as in every cell
        assert step["result"] and line.endswith(f" ⇒ {shown}"), (line, step)


def test_tree_draws_siblings_and_their_subtrees_with_rich_s_guides(tmp_path: Path) -> None:
    """The guides drawn by hand are the ones Rich's `Tree` drew: a run with siblings after it
    keeps its `│` down beside its subtree."""
    path = tmp_path / "tree.sqlite3"
    with Store.open(path) as store:
        root = store.start_run("root", "f")
        a = store.start_child_run("a", "f", root, 1)
        b = store.start_child_run("b", "f", root, 1)
        a1 = store.start_child_run("a1", "f", a, 2)
        store.start_child_run("a2", "f", a, 2)
        store.start_child_run("b1", "f", b, 2)
        store.start_child_run("a1x", "f", a1, 3)
        store.start_child_run("c", "f", root, 1)
    label = "running  —  0 steps  0 tokens"
    assert ok("tree", path, str(root)).splitlines() == [
        f"run 1  {label}  root",
        f"├── run 2  {label}  a",
        f"│   ├── run 4  {label}  a1",
        f"│   │   └── run 7  {label}  a1x",
        f"│   └── run 5  {label}  a2",
        f"├── run 3  {label}  b",
        f"│   └── run 6  {label}  b1",
        f"└── run 8  {label}  c",
        "8 runs, 0 steps, 0 tokens",
    ]
