"""Output into a pipe the reader closes early ends quietly with exit 0 (scripts under
`set -o pipefail` rely on it), and the read commands leave no side files beside a store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.clirun import COMMAND, environ, run_in_process, step_store

from harness_store import Store


@pytest.fixture(scope="module")
def long_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose first run has 30,000 steps, with 3,000 runs: more output than a pipe
    holds."""
    path = tmp_path_factory.mktemp("pipes") / "runs.sqlite3"
    step_store(path, 30_000)
    with Store.open(path) as store, store.transaction():
        for n in range(3_000):
            store.start_run(f"goal {n}", "task.md")
    return path


@pytest.mark.parametrize(
    "args",
    [("trace", "{db}", "1"), ("runs", "{db}", "--all"), ("runs", "{db}", "--all", "--json"),
     ("trace", "{db}", "1", "--json")],
    ids=" ".join,
)  # fmt: skip
def test_a_pipe_closed_early_ends_quietly(args: tuple[str, ...], long_store: Path) -> None:
    """As `harness-store … | head -1`: the reader takes one line and closes the pipe."""
    proc = subprocess.Popen(
        [*COMMAND, *(a.format(db=long_store) for a in args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    assert err == ""


READ_COMMANDS = (
    ("inspect", "{db}"),
    ("runs", "{db}"),
    ("trace", "{db}", "1"),
    ("tree", "{db}", "1"),
    ("memory", "{db}", "/repo"),
    ("spend", "{db}"),
    ("events", "{db}"),
    ("patch", "{db}", "1"),
    ("size", "{db}"),
    ("origins", "{db}"),
)


@pytest.mark.parametrize("args", READ_COMMANDS, ids=" ".join)
def test_read_commands_leave_no_side_files(args: tuple[str, ...], tmp_path: Path) -> None:
    """A closed WAL store has no -wal or -shm; reading it creates none."""
    db = tmp_path / "runs.sqlite3"
    with Store.open(db) as store:
        store.start_run("a goal", "task.md")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert not {"runs.sqlite3-wal", "runs.sqlite3-shm"} & set(before), before
    ran = run_in_process(*(a.format(db=db) for a in args))
    assert ran.returncode == 0, ran
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_runs_origin_takes_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`runs --origin sources/a.sqlite3` from the directory it was synced from: the same runs
    as its absolute path and its UUID."""
    (tmp_path / "sources").mkdir()
    source = tmp_path / "sources" / "a.sqlite3"
    with Store.open(source) as store:
        store.start_run("from a", "task.md")
    central = tmp_path / "central.sqlite3"
    monkeypatch.chdir(tmp_path)
    synced = run_in_process("sync", "sources/a.sqlite3", central)
    assert synced.returncode == 0, synced
    by_absolute = run_in_process("runs", central, "--origin", source, "--json")
    assert by_absolute.returncode == 0, by_absolute
    by_relative = run_in_process("runs", central, "--origin", "sources/a.sqlite3", "--json")
    assert by_relative.returncode == 0, by_relative
    assert by_relative.stdout == by_absolute.stdout
    assert '"goal": "from a"' in by_relative.stdout
