"""`harness-store` at the edges of numbers and text: ids past 2⁶³, token sums that overflow,
bytes that are not UTF-8, unknown statuses. Each is a clear exit code or a shown value, never
a traceback or a whole command lost to one bad row."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.rows import foreign_steps

from harness_store import Store
from harness_store.records import StepRecord

BIG = str(2**63)


@pytest.fixture
def three_runs(tmp_path: Path) -> Path:
    """Runs 1-3; run 2's two steps of 2⁶² tokens sum to 2⁶³, past a signed 64-bit integer."""
    path = tmp_path / "edges.sqlite3"
    with Store.open(path) as store:
        for n in range(1, 4):
            run_id = store.start_run(f"goal {n}", "task.md")
            if n == 2:  # a total the Store refuses: as another writer of the store wrote it
                foreign_steps(store, run_id, 2**62, 2**62)
                continue
            store.checkpoint_steps(
                run_id, [StepRecord(1, "a", "r", tokens=10), StepRecord(2, "b", "r", tokens=10)]
            )
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["trace", "{db}", BIG],
        ["tree", "{db}", BIG],
        ["trace", "{db}", "1", "--limit", "99999999999999999999"],
        ["runs", "{db}", "--limit", "99999999999999999999"],
        ["trace", "{db}", "1", "--from-step", BIG],
        ["runs", "{db}", "--status", "bogus"],
    ],
)
def test_out_of_range_arguments_are_usage_errors(three_runs: Path, args: list[str]) -> None:
    done = run_in_process(*(str(three_runs) if a == "{db}" else a for a in args))
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "OverflowError" not in done.stderr
    assert done.stdout == ""


def test_a_run_whose_tokens_overflow_does_not_hide_the_others(three_runs: Path) -> None:
    done = run_in_process("runs", three_runs)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == ["3", "2", "1"]
    assert "overflow" in lines[1] and "overflow" not in lines[0] + lines[2]
    rows = {
        row["run_id"]: row
        for row in json.loads(run_in_process("runs", three_runs, "--json").stdout)
    }
    assert rows[2]["tokens"] == 2**63 and rows[2]["tokens_overflow"] is True
    assert rows[1]["tokens"] == rows[3]["tokens"] == 20
    assert rows[1]["tokens_overflow"] is False


def test_invalid_utf8_in_one_step_is_shown_replaced(three_runs: Path) -> None:
    with closing(sqlite3.connect(three_runs)) as conn, conn:
        conn.execute(
            "UPDATE steps SET decision = CAST(X'626164ff6279746573' AS TEXT) "
            "WHERE run_id = 1 AND step = 2"
        )
    done = run_in_process("trace", three_runs, "1")
    assert done.returncode == 0, done.stderr
    assert "bad\ufffdbytes" in done.stdout and "   1  step" in done.stdout
    assert "not UTF-8" in done.stderr and "U+FFFD" in done.stderr
    lines = run_in_process("trace", three_runs, "1", "--jsonl").stdout.splitlines()
    assert json.loads(lines[-1])["invalid_utf8_values"] == 1
    assert any(json.loads(line).get("decision") == "bad\ufffdbytes" for line in lines)
