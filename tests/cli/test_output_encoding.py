"""A terminal (or pipe) whose encoding cannot show a character a store holds — a goal with an
em dash or a check mark read under `PYTHONIOENCODING=ascii` — still gets the whole output: the
character is written as a backslash escape, never a `UnicodeEncodeError` ending the command
halfway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.clirun import run_cli

from harness_store import StepRecord, Store

GOAL = "ship it — now ✓ 🚀"


@pytest.fixture(scope="module")
def wide_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree of two runs whose texts hold characters outside ASCII."""
    path = tmp_path_factory.mktemp("wide") / "runs.sqlite3"
    with Store.open(path, backup=False) as store:
        run = store.start_run(GOAL, "plan")
        store.checkpoint_step(
            run, StepRecord(1, "décide ✓", "résultat").with_trace("p", 'read_file:{"n":"é"}', 2)
        )
        store.start_child_run("child ✓", "b", run, 1)
    return path


@pytest.mark.parametrize(
    "args",
    [("trace", "1"), ("trace", "1", "--json"), ("tree", "1"), ("runs",), ("runs", "--json")],
    ids=" ".join,
)
def test_what_the_output_encoding_cannot_show_is_escaped(
    wide_store: Path, args: tuple[str, ...]
) -> None:
    """Before: each of these ended with "UnicodeEncodeError: 'ascii' codec can't encode
    character" after printing part of its output."""
    done = run_cli(args[0], wide_store, *args[1:], env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout.isascii()
    assert "\\u2014" in done.stdout or "\\u2713" in done.stdout
    if "--json" in args:  # each escape is JSON's own: the document reads back as stored
        assert GOAL in json.dumps(json.loads(done.stdout), ensure_ascii=False)
