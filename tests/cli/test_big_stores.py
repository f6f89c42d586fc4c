"""`harness-store` on big stores: trace and runs stream, in memory that does not grow with the
store. Structural checks only (the first line arrives while the command still runs; peak memory
at two sizes within a generous factor); the timings are in bench/cli.py."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from support.clirun import COMMAND, environ, peak_rss_kib, run_in_process, step_store
from support.tiers import sampled

from harness_store import Store

from .commandkit import as_json, ok

SMALL, LARGE = 20_000, 200_000


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two stores whose first run has SMALL and LARGE steps (and 1,200 runs in all)."""
    base = tmp_path_factory.mktemp("big")
    return (
        step_store(base / "small.sqlite3", SMALL, runs=1_200),
        step_store(base / "large.sqlite3", LARGE, runs=1_200),
    )


def first_line_while_running(*args: str | Path) -> str:
    """Start the command piped, read its first line, and check the command has not finished:
    its output is written as it is read, not after."""
    proc = subprocess.Popen(
        [*COMMAND, *map(str, args)], stdout=subprocess.PIPE, env=environ(), text=True
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line, "no output"
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    return line


@pytest.mark.parametrize(
    "options", sampled([[], ["--json"], ["--jsonl"]], keep=1, ids=["text", "json", "jsonl"])
)
def test_trace_memory_does_not_grow_with_the_run(
    stores: tuple[Path, Path], options: list[str]
) -> None:
    small, large = stores
    assert first_line_while_running("trace", large, "1", *options)
    low = peak_rss_kib("trace", small, "1", *options)
    high = peak_rss_kib("trace", large, "1", *options)
    # Ten times the steps: a trace held in memory would grow ~10×; a streamed one stays put.
    assert high < low * 1.5, (low, high)


def test_runs_all_memory_does_not_grow_with_the_store(stores: tuple[Path, Path]) -> None:
    small, large = stores
    low = peak_rss_kib("runs", small, "--all")
    high = peak_rss_kib("runs", large, "--all")
    assert high < low * 1.5, (low, high)


def test_trace_jsonl_is_one_document_a_line_and_ends_with_totals(
    stores: tuple[Path, Path],
) -> None:
    small, _ = stores
    done = run_in_process("trace", small, "1", "--jsonl")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "run" and lines[0]["goal"] == "the long run"
    steps = [line for line in lines if line["type"] == "step"]
    assert [s["step"] for s in steps] == list(range(1, SMALL + 1))
    assert lines[-1] == {
        "type": "totals",
        "entry_count": 2 * SMALL,
        "tokens": SMALL,
        "invalid_utf8_values": 0,
    }


def test_trace_json_streamed_is_one_document(stores: tuple[Path, Path]) -> None:
    small, _ = stores
    done = run_in_process("trace", small, "1", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["run_id"] == 1 and doc["tokens"] == SMALL
    assert len(doc["entries"]) == doc["entry_count"] == 2 * SMALL  # a checkpoint a step


@pytest.mark.parametrize("as_json", [False, True])
def test_trace_window(stores: tuple[Path, Path], as_json: bool) -> None:
    small, _ = stores
    args = ["trace", small, "1", "--from-step", "100", "--to-step", "199", "--limit", "30"]
    done = run_in_process(*args, *(["--jsonl"] if as_json else []))
    assert done.returncode == 0, done.stderr
    if as_json:
        entries = [json.loads(line) for line in done.stdout.splitlines()[1:-1]]
        shown = [(e["step"], e["type"]) for e in entries]
    else:
        shown = [(int(line.split()[0]), line.split()[1]) for line in done.stdout.splitlines()[2:]]
    # 30 entries from step 100: each step, then its checkpoint.
    assert shown == [(n, kind) for n in range(100, 115) for kind in ("step", "checkpoint")]


def test_runs_defaults_to_the_newest_50_and_says_how_many_more(
    stores: tuple[Path, Path],
) -> None:
    small, _ = stores
    done = run_in_process("runs", small)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [int(line.split()[0]) for line in lines[1:]] == list(range(1_200, 1_150, -1))
    assert done.stderr == "50 runs shown; 1,150 more (--limit N or --all)\n"
    every = run_in_process("runs", small, "--all", "--json")
    rows = json.loads(every.stdout)
    assert [row["run_id"] for row in rows] == list(range(1_200, 0, -1))
    assert rows[-1]["steps"] == SMALL and rows[-1]["tokens"] == SMALL
    assert every.stderr == ""


# --- deep trees ------------------------------------------------------------------------------

SHALLOW_CHAIN, DEEP_CHAIN = 1_000, 10_000


def chain_store(path: Path, depth: int) -> Path:
    """A store holding one chain of spawns `depth` runs deep (run k the child of run k-1),
    written with sqlite3 as a store that grew so would hold it."""
    Store.open(path).close()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(
            "INSERT INTO runs (id, goal, file, parent_run_id, depth, status, started_at) "
            "VALUES (?, ?, 'task.md', ?, ?, 'completed', '2026-01-01T00:00:00Z')",
            ((k, f"goal {k}", k - 1 if k > 1 else None, k - 1) for k in range(1, depth + 1)),
        )
    return path


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("chains")
    return (
        chain_store(base / "shallow.sqlite3", SHALLOW_CHAIN),
        chain_store(base / "deep.sqlite3", DEEP_CHAIN),
    )


def test_a_deep_chain_is_drawn_in_lines_that_do_not_widen(tmp_path: Path) -> None:
    """Each line used to carry four columns of guides per level above it: a chain 300 deep
    drew lines 1,200 columns wide (and 10,000 deep took minutes and gigabytes). Past 24
    levels a line says how many levels it leaves out instead; 300 levels are enough to show
    it, as the width stops at 24."""
    path = chain_store(tmp_path / "chain.sqlite3", 300)
    lines = ok("tree", path, "1").splitlines()
    assert lines[-1] == "300 runs, 0 steps, 0 tokens"
    drawn = lines[:-1]
    assert [int(line.split("run ")[1].split()[0]) for line in drawn] == list(range(1, 301))
    assert max(len(line) for line in drawn) <= 24 * 4 + len("+276 ") + len(drawn[-1].lstrip())
    # run 25, 24 levels down, is the deepest drawn whole; run 26 leaves out one level
    assert drawn[24].lstrip().startswith("└── run 25") and drawn[24].endswith("goal 25")
    assert len(drawn[24]) - len(drawn[24].lstrip()) == 23 * 4
    assert drawn[25].startswith("+1 ") and drawn[-1].startswith("+275 ")


@pytest.mark.parametrize("options", [[], ["--json"]], ids=["text", "json"])
def test_a_chain_10000_deep_renders_in_memory_that_does_not_grow_with_depth(
    chains: tuple[Path, Path], options: list[str]
) -> None:
    shallow, deep = chains
    low = peak_rss_kib("tree", shallow, "1", *options)
    high = peak_rss_kib("tree", deep, "1", *options)
    # Ten times the depth: drawn per level, a line at a time, memory grows with the runs
    # alone; drawn anew for every line's guides it grew with the square of the depth.
    assert high < low * 1.5, (low, high)
    assert high < 200 * 1024, high
    if not options:
        tree = as_json("tree", deep, "1")
        assert tree["runs"] == DEEP_CHAIN and tree["nodes"][-1]["depth"] == DEEP_CHAIN - 1
