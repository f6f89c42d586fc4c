"""The `harness-store` command, driven for real: a subprocess against real stores.

Stores are copies of the io-harness 0.22/0.29 fixtures (checked against their JSON files) and
legacy stores built by `legacy` (born at a release, torn). Every read command must leave the
file's bytes as they were; errors must be one line with the documented exit code.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from support import legacy
from support.clirun import run_cli
from support.shared import FIXTURE_STORES, FIXTURES, in_newest_memory_order

from harness_store import Store
from harness_store.cli import read_only_url
from harness_store.engine import to_url
from harness_store.releases import HEAD

Copy = Callable[[str], Path]

EXIT_USAGE, EXIT_NOT_A_STORE, EXIT_LOCKED, EXIT_NOT_FOUND = 2, 3, 4, 5


def ok(*args: str | Path) -> str:
    """Run a command that must succeed; its stdout, checked to be plain text."""
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    return done.stdout


def as_json(*args: str | Path) -> Any:
    return json.loads(ok(*args, "--json"))


def fails(code: int, *args: str | Path, said: str = "") -> str:
    """Run a command that must fail with `code`: one line on stderr, no traceback, and on
    stdout nothing but `said` (`upgrade` says what it found before it starts)."""
    done = run_cli(*args)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness-store: error: "), done.stderr
    assert done.stdout.startswith(said) and done.stdout.count("\n") == bool(said), done.stdout
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def sql(path: Path, query: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows read straight from the file with the standard library, read-only."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return conn.execute(query, args).fetchall()


@pytest.fixture
def torn(tmp_path: Path) -> Path:
    """A store whose 0.7 open was killed midway (0.6 complete, part of 0.7)."""
    path = tmp_path / "torn.sqlite3"
    legacy.build_torn(path, "0.7", legacy.torn_points("0.7")[0])
    return path


@pytest.fixture
def born_05(tmp_path: Path) -> Path:
    path = tmp_path / "born-0.5.sqlite3"
    legacy.build_born_at(path, "0.5")
    return path


@pytest.fixture
def born_013(tmp_path: Path) -> Path:
    """An untracked store as io-harness 0.13 leaves it, full of awkward text."""
    path = tmp_path / "born-0.13.sqlite3"
    legacy.build_born_at(path, "0.13")
    return path


# --- the command itself ------------------------------------------------------------------


def test_help_names_every_command_and_the_exit_codes() -> None:
    out = ok("--help")
    for command in ("inspect", "upgrade", "runs", "trace", "tree", "memory", "copy"):
        assert command in out
    assert "Exit codes" in out and "4  locked" in out
    assert "harness-store upgrade" in out  # the exit codes say it once, here, not per command


def test_installed_script_runs() -> None:
    script = Path(sys.executable).parent / "harness-store"
    if not script.exists():
        pytest.skip("the harness-store script is not installed (pip install -e .)")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "inspect" in done.stdout


# --- inspect -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURE_STORES)
def test_inspect_fixture_names_its_release_and_is_unchanged(fixture_copy: Copy, name: str) -> None:
    path = fixture_copy(name)
    release = "0.22" if "0.22.0" in name else "0.28"  # 0.29 changed no schema
    before = digest(path)
    out = ok("inspect", path)
    assert f"io-harness {release} store" in out
    assert "user_version: 7" in out and "journal mode: wal" in out
    doc = as_json("inspect", path)
    assert doc["kind"] == "upstream" and doc["release"] == release and doc["readable"] is True
    assert doc["revision"] is None and doc["at_head"] is False
    assert doc["user_version"] == 7 and doc["journal_mode"] == "wal"
    assert doc["size_bytes"] == path.stat().st_size
    assert doc["extra"] == []
    tables = [r[0] for r in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")]
    expected = {
        t: sql(path, f'SELECT COUNT(*) FROM "{t}"')[0][0]
        for t in tables
        if not t.startswith("sqlite_")
    }
    assert doc["tables"] == expected
    assert digest(path) == before
    assert sql(path, "SELECT name FROM sqlite_master WHERE name = 'alembic_version'") == []


def test_inspect_torn_store_says_torn_and_switches_nothing(torn: Path) -> None:
    before = digest(torn)
    out = ok("inspect", torn)
    assert "torn open of 0.7" in out
    assert "journal mode: delete" in out
    doc = as_json("inspect", torn)
    assert doc["torn_of"] == "0.7" and doc["release"] == "0.6" and doc["readable"] is False
    assert doc["missing"] and doc["present"]
    assert digest(torn) == before
    assert sql(torn, "PRAGMA journal_mode") == [("delete",)]
    assert not torn.with_name(torn.name + "-wal").exists()


def test_inspect_legacy_store(born_05: Path) -> None:
    before = digest(born_05)
    doc = as_json("inspect", born_05)
    assert doc["description"] == "io-harness 0.5 store"
    assert (doc["revision"], doc["shape_revision"], doc["user_version"]) == (None, "0.5", 0)
    assert doc["tables"]["runs"] == sql(born_05, "SELECT COUNT(*) FROM runs")[0][0]
    assert "harness-store upgrade" in ok("inspect", born_05)
    assert digest(born_05) == before


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


def assert_read_only_url_refuses(target: str | Path, refusal: str) -> None:
    """A delete through `read_only_url(target)` is refused by the database itself."""
    engine = create_engine(read_only_url(to_url(target)))
    try:
        with engine.connect() as conn, pytest.raises(DBAPIError, match=refusal):
            conn.execute(text("DELETE FROM runs"))
    finally:
        engine.dispose()


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


def test_runs_filter_by_status(fixture_copy: Copy) -> None:
    name = "io-harness-0.22.0/deferred-approval"
    facts = fixture_json(name)
    path = fixture_copy(name)
    paused = as_json("runs", path, "--status", "paused")
    assert [r["run_id"] for r in paused] == [facts["run_id"]]
    assert paused[0]["outcome"] == facts["outcome"] and paused[0]["duration_ms"] is None
    assert as_json("runs", path, "--status", "running") == []
    done = run_cli("runs", path, "--status", "running")
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
    done = run_cli(
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
    done = run_cli("memory", path, "/elsewhere")
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


# --- errors ------------------------------------------------------------------------------


def make_bad(kind: str, tmp_path: Path) -> Path:
    """A path that is no readable run store, of the given kind."""
    path = tmp_path / f"{kind}.sqlite3"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty-file":
        path.touch()
    elif kind == "text-file":
        path.write_text("not a database\n" * 20)
    elif kind == "foreign":
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
            conn.commit()
    elif kind == "newer-format":
        legacy.build_born_at(path, "0.13")
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 8")
    elif kind == "empty-database":
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 0")
            conn.commit()
    return path


BAD = {
    "missing": "no run store at",
    "directory": "is a directory",
    "empty-file": "empty database (no tables)",
    "text-file": "not a SQLite database",
    "foreign": "not an io-harness run store",
    "newer-format": "checkpoint format 8 is newer",
    "empty-database": "empty database (no tables)",
}


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("command", ["inspect", "runs", "upgrade"])
def test_not_a_store_is_one_line_and_exit_3(tmp_path: Path, kind: str, command: str) -> None:
    if kind in ("empty-database", "empty-file") and command in ("inspect", "upgrade"):
        pytest.skip("an empty SQLite database is inspectable, and upgrade creates a store in it")
    if kind == "missing" and command == "upgrade":
        pytest.skip("upgrade creates a store where none is (test_cli_terminal)")
    path = make_bad(kind, tmp_path)
    before = digest(path) if path.is_file() else None
    assert BAD[kind] in fails(EXIT_NOT_A_STORE, command, path)
    if before is not None:
        assert digest(path) == before
    assert path.exists() == (kind != "missing")


def test_usage_errors_are_exit_2(fixture_copy: Copy) -> None:
    path = fixture_copy("io-harness-0.22.0/populated")
    assert "not a usable store path or URL" in fails(EXIT_USAGE, "runs", "nosuchdb://x/y")
    assert "newer than 0.66" in fails(EXIT_USAGE, "upgrade", path, "--to", "0.99")
    assert "unknown revision" in fails(EXIT_USAGE, "upgrade", path, "--to", "latest")
    done = run_cli("tree", path, "one")
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://someone:s3cr3t-pw@127.0.0.1:1/nowhere",
        "nosuchdb://someone:s3cr3t-pw@host/x",
        "postgresql://someone:s3cr3t-pw@host:notaport/x",
    ],
)
def test_a_password_is_never_printed(url: str) -> None:
    done = run_cli("runs", url)
    assert done.returncode in (1, EXIT_USAGE) and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "s3cr3t-pw" not in done.stdout + done.stderr


def test_locked_store_is_exit_4(born_05: Path) -> None:
    """A writer holding a rollback-journal store exclusively blocks even a reader."""
    with closing(sqlite3.connect(born_05, isolation_level=None)) as holder:
        holder.execute("BEGIN EXCLUSIVE")
        assert "locked" in fails(EXIT_LOCKED, "inspect", born_05)
        holder.execute("ROLLBACK")


def test_upgrade_of_a_store_held_by_a_writer_is_exit_4(born_013: Path) -> None:
    with closing(sqlite3.connect(born_013, isolation_level=None)) as holder:
        assert holder.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        holder.execute("BEGIN IMMEDIATE")
        line = fails(EXIT_LOCKED, "upgrade", born_013, "--no-backup", said="found: ")
        assert "locked" in line
        holder.execute("ROLLBACK")
    assert sql(born_013, "SELECT name FROM sqlite_master WHERE name = 'alembic_version'") == []


# --- upgrade -----------------------------------------------------------------------------


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".*.bak"))


@pytest.mark.parametrize("name", ["io-harness-0.22.0/populated", "io-harness-0.29.0/aggregates"])
def test_upgrade_fixture_backs_up_and_reaches_head(fixture_copy: Copy, name: str) -> None:
    path = fixture_copy(name)
    before = as_json("inspect", path)
    out = ok("upgrade", path)
    (backup,) = backups(path)
    release = "0.22" if "0.22.0" in name else "0.28"
    assert f"backup: {backup}" in out and f"stamped at {release}" in out and f"now at {HEAD}" in out
    after = as_json("inspect", path)
    assert after["revision"] == HEAD and after["at_head"] is True
    for table, count in before["tables"].items():
        assert after["tables"][table] == count
    assert set(after["tables"]) - set(before["tables"]) >= {"tool_attempts", "run_leases"}
    kept = as_json("inspect", backup)
    assert kept["revision"] is None and kept["tables"] == before["tables"]
    again = ok("upgrade", path)
    assert f"already at {HEAD}; nothing changed" in again
    assert backups(path) == [backup]
    assert as_json("runs", path) == as_json("runs", backup)


def test_upgrade_legacy_step_by_step(born_05: Path) -> None:
    report = as_json("upgrade", born_05, "--to", "0.9")
    assert (report["before"], report["after"], report["stamped"]) == ("0.5", "0.9", "0.5")
    assert report["backup"] and Path(report["backup"]).exists()
    assert as_json("inspect", born_05)["revision"] == "0.9"
    before = digest(born_05)
    assert "upgrade never goes down" in fails(EXIT_USAGE, "upgrade", born_05, "--to", "0.3")
    assert digest(born_05) == before
    out = ok("upgrade", born_05, "--no-backup")
    assert f"0.9 → {HEAD}" in out and "backup: none (--no-backup)" in out
    assert len(backups(born_05)) == 1
    doc = as_json("inspect", born_05)
    assert (doc["revision"], doc["journal_mode"], doc["user_version"]) == (HEAD, "wal", 7)
    assert as_json("runs", born_05)


def test_upgrade_to_a_release_name_lands_on_its_revision(born_05: Path) -> None:
    """`--to` takes io-harness release names too: 0.40 changed no schema, so it means 0.37."""
    report = as_json("upgrade", born_05, "--to", "0.40", "--no-backup")
    assert (report["before"], report["after"]) == ("0.5", "0.37")
    assert "newer than 0.66" in fails(EXIT_USAGE, "upgrade", born_05, "--to", "0.67")


def test_upgrade_torn_store(torn: Path) -> None:
    out = ok("upgrade", torn)
    assert "torn open of 0.7" in out and f"now at {HEAD}" in out
    assert backups(torn)
    assert as_json("inspect", torn)["revision"] == HEAD


def test_read_only_file_is_read_but_not_upgraded(born_05: Path, born_013: Path) -> None:
    for path in (born_05, born_013):
        path.chmod(0o444)
    assert as_json("runs", born_013)
    before = digest(born_05)
    assert as_json("inspect", born_05)["shape_revision"] == "0.5"
    assert "read-only" in fails(1, "upgrade", born_05, said="found: io-harness 0.5 store")
    assert digest(born_05) == before and backups(born_05) == []


# --- PostgreSQL --------------------------------------------------------------------------


def test_postgresql_store_read_only_and_password_hidden(pg_url: str) -> None:
    url = make_url(pg_url).set(password="s3cr3t-pw").render_as_string(hide_password=False)
    ok("upgrade", pg_url)
    with Store.open(pg_url) as store:
        root = store.start_run("root goal", "f")
        child = store.start_child_run("child goal", "f", root, 1)
        store.memory_put("ws", "k", "v", root, 1)
        store.finish_run(child, "success")
    done = run_cli("inspect", url)
    assert "s3cr3t-pw" not in done.stdout + done.stderr
    if done.returncode == 0:
        assert "***" in done.stdout and f"{HEAD} (stamped)" in done.stdout
    doc = as_json("inspect", pg_url)
    assert doc["tables"]["runs"] == 2 and doc["journal_mode"] is None
    assert [r["run_id"] for r in as_json("runs", pg_url)] == [child, root]
    assert as_json("tree", pg_url, str(root))["run_ids"] == [root, child]
    assert [e["key"] for e in as_json("memory", pg_url, "ws")["entries"]] == ["k"]
    assert_read_only_url_refuses(pg_url, "read-only")


# --- copy (needs harness_store.transfer) -------------------------------------------------


def test_copy_sqlite_to_sqlite(fixture_copy: Copy, tmp_path: Path) -> None:
    pytest.importorskip("harness_store.transfer")
    source = fixture_copy("io-harness-0.22.0/interrupted")
    before = digest(source)
    target = tmp_path / "copied.sqlite3"
    done = run_cli("copy", source, target, "--batch-size", "2", "--skip-unknown-tables")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "runs: 3/3 rows" in done.stderr and "steps: 4/4 rows" in done.stderr
    assert "row counts verified" in done.stdout and "provider_calls" in done.stdout
    assert digest(source) == before
    assert as_json("tree", target, "1")["tokens"] == 400
    report = as_json("copy", source, tmp_path / "again.sqlite3")
    assert report["counts"]["runs"] == 3 and report["counts"]["steps"] == 4
    assert report["counts"]["provider_calls"] == 4 and report["skipped_tables"] == {}
    line = fails(EXIT_NOT_A_STORE, "copy", source, target)
    assert "copied.sqlite3" in line


def test_copy_progress_on_a_terminal(fixture_copy: Copy, tmp_path: Path) -> None:
    pytest.importorskip("harness_store.transfer")
    source = fixture_copy("io-harness-0.22.0/populated")
    done = run_cli(
        "copy",
        source,
        tmp_path / "copied.sqlite3",
        "--skip-unknown-tables",
        env={"FORCE_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" in done.stderr and "ledger_observations" in done.stderr


def test_copy_sqlite_to_postgresql(fixture_copy: Copy, pg_url: str) -> None:
    pytest.importorskip("harness_store.transfer")
    source = fixture_copy("io-harness-0.22.0/populated")
    report = as_json("copy", source, pg_url, "--skip-unknown-tables")
    assert report["counts"]["steps"] == 4
    assert as_json("trace", pg_url, "1")["tokens"] == 1140
