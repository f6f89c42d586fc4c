"""`harness-store` as a person meets it on a terminal (a real pseudo-terminal, COLUMNS set):
tables fit the width, help and version, plural forms, UTC times, `upgrade` telling what it found
before it changes anything."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
from rich.cells import cell_len
from support import legacy
from support.clirun import on_terminal, run_cli, run_in_process

from harness_store import Store
from harness_store.records import StepRecord
from harness_store.releases import HEAD

ANSI = "\x1b["


def plain(text: str) -> str:
    """Terminal output without ANSI sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.fixture
def wordy(tmp_path: Path) -> Path:
    """Six runs with long goals (one of a megabyte), long outcomes and big numbers."""
    path = tmp_path / "wordy.sqlite3"
    with Store.open(path) as store:
        for n in range(6):
            goal = ("a megabyte goal " * 65_536) if n == 3 else f"goal {n} " + "word " * 60
            run = store.start_run(goal, "task.md")
            store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=123_456_789))
            if n % 2:
                store.finish_run(run, "a long outcome " * 10)
    return path


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_runs_fit_the_terminal_with_ids_and_numbers_whole(wordy: Path, columns: int) -> None:
    code, out = on_terminal("runs", wordy, columns=columns)
    assert code == 0, out
    # Where the table is too wide, a note on stderr names the columns left out (parent first).
    lines = plain(out).splitlines()
    if columns == 80:
        assert lines.pop(0).startswith(f"(not shown at {columns} columns: parent")
    assert len(lines) == 7  # the header and six runs, one line each
    assert all(cell_len(line) <= columns for line in lines), [cell_len(x) for x in lines]
    assert lines[0].split()[:2] == (["id", "status"] if columns == 80 else ["id", "parent"])
    assert [line.split()[0] for line in lines[1:]] == ["6", "5", "4", "3", "2", "1"]
    assert all("123,456,789" in line and "2026-" in line for line in lines[1:])
    assert all(line.endswith("…") for line in lines[1:])


def test_runs_on_a_very_narrow_terminal_still_show_ids_and_numbers(wordy: Path) -> None:
    code, out = on_terminal("runs", wordy, columns=40)
    assert code == 0, out
    lines = [line for line in plain(out).splitlines() if line.strip()]
    # Wider than the screen, so the terminal wraps it; but nothing is dropped or cut.
    assert sum("123,456,789" in line for line in lines) == 6
    assert ANSI in out  # it is drawn for a terminal (bold header)


def test_json_and_pipe_keep_the_full_text(wordy: Path) -> None:
    rows = json.loads(run_cli("runs", wordy, "--json").stdout)
    assert len(rows[2]["goal"]) == len("a megabyte goal ") * 65_536
    lines = run_cli("runs", wordy).stdout.splitlines()
    assert lines[3].endswith("a megabyte goal")  # piped output is not cut


def test_help_flags_version_and_usage_lines() -> None:
    for flag in ("-h", "--help"):
        done = run_cli(flag)
        assert done.returncode == 0 and "Usage: harness-store" in done.stdout
        sub = run_cli("runs", flag)
        assert sub.returncode == 0
        usage = sub.stdout.splitlines()[0]
        assert usage == "Usage: harness-store runs [OPTIONS] DB", usage
        assert "<str>" not in sub.stdout and "{DB}" not in sub.stdout
    version = run_cli("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("harness-store 0.") and HEAD in version.stdout


def test_plurals_and_utc(tmp_path: Path) -> None:
    path = tmp_path / "one.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("only", "task.md")
        store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=1))
    code, out = on_terminal("tree", path, "1")
    assert code == 0
    text = plain(out)
    assert "1 run, 1 step, 1 token" in text and "1 runs" not in text and "1 steps" not in text
    header = run_cli("runs", path).stdout.splitlines()[0]
    assert "started (UTC)" in header


def test_upgrade_says_what_it_found_before_it_starts(tmp_path: Path) -> None:
    legacy_store = tmp_path / "old.sqlite3"
    legacy.build_born_at(legacy_store, "0.5")
    code, out = on_terminal("upgrade", legacy_store)
    assert code == 0, out
    text = plain(out)
    assert text.index("found: ") < text.index("upgraded ")
    assert text.count("found: ") == 1
    if "upgrading" in text:  # the spinner, on the same terminal
        assert text.index("found: ") < text.index("upgrading")


def test_upgrade_creates_a_store_where_none_is(tmp_path: Path) -> None:
    target = tmp_path / "new.sqlite3"
    done = run_cli("upgrade", target)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"found: no store at {target}; creating one at {HEAD}"
    assert json.loads(run_cli("inspect", target, "--json").stdout)["at_head"] is True
    again = run_cli("upgrade", target)
    assert "nothing to do" in again.stdout
    missing_dir = run_cli("upgrade", tmp_path / "no" / "such.sqlite3")
    assert missing_dir.returncode == 3 and "no directory" in missing_dir.stderr


def test_names_are_one_line_on_a_terminal(wordy: Path) -> None:
    code, out = on_terminal("runs", wordy, "--limit", "1", columns=80)
    assert code == 0
    assert not any(unicodedata.category(c) == "Cc" for c in plain(out).replace("\n", ""))


def test_one_is_singular_in_sync_and_the_parquet_export(tmp_path: Path) -> None:
    """ "synced 1 stores …: 3 rows" and "runs: rewritten, 1 rows (1 in all)": one of a thing is
    said in the singular, as `plural` says it everywhere else."""
    path = tmp_path / "one.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("only", "task.md")
        store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=1))
    synced = run_in_process("sync", path, tmp_path / "central.sqlite3")
    assert synced.returncode == 0, synced.stderr
    assert " 1 store into " in synced.stdout and " 1 stores " not in synced.stdout
    exported = run_in_process("export", "parquet", path, tmp_path / "pq")
    assert exported.returncode == 0, exported.stderr
    assert "runs: rewritten, 1 row (1 in all)" in exported.stdout.splitlines()
    assert " 1 rows" not in exported.stdout


def test_a_deep_tree_on_a_narrow_terminal_shows_every_run(tmp_path: Path) -> None:
    """On an 80-column terminal the guides of a run 30 levels down would fill the line and
    its label be cut away: the levels drawn there leave room for the label."""
    path = tmp_path / "chain.sqlite3"
    with Store.open(path) as store:
        parent = store.start_run("goal 1", "task.md")
        for k in range(2, 31):
            parent = store.start_child_run(f"goal {k}", "task.md", parent, k - 1)
    code, out = on_terminal("tree", path, "1", columns=80)
    assert code == 0, out
    lines = plain(out).splitlines()[:-1]
    assert len(lines) == 30 and all(len(line) <= 80 for line in lines), lines
    assert all(f"run {k} " in line for k, line in enumerate(lines, start=1)), lines
    # 80 columns keep 40 for the label: 10 levels drawn, the deeper runs say how many are not
    for depth, line in enumerate(lines):
        marked = line.startswith(f"+{depth - 10} ") if depth > 10 else not line.startswith("+")
        assert marked, (depth, line)
