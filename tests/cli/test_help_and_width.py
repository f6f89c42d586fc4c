"""What a newcomer reads first: the help (exit codes once, completion on, versions true) and
tables that fit an 80-column terminal without cutting an id."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest
from support.clirun import on_terminal, run_in_process

from harness_store import Store
from harness_store.cli import app
from harness_store.records import ProviderCall, StepRecord, Usage
from harness_store.releases import NEWEST_KNOWN_RELEASE

REPO = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def command_names() -> list[str]:
    names = [c.name for c in app.registered_commands if c.name]
    return names + [g.name for g in app.registered_groups if g.name]


def test_exit_codes_once_in_the_top_level_help_and_completion_on() -> None:
    top = run_in_process("--help")
    assert top.stdout.count("Exit codes") == 1
    assert "--install-completion" in top.stdout
    for name in command_names():
        sub = run_in_process(name, "--help")
        assert sub.returncode == 0, (name, sub)
        assert "Exit codes" not in sub.stdout, name


def test_the_versions_it_names_are_true() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert f"0.1 → {NEWEST_KNOWN_RELEASE}" in project["description"]
    inspect_help = " ".join(run_in_process("inspect", "--help").stdout.split())
    assert f"newer than {NEWEST_KNOWN_RELEASE}" in inspect_help
    assert "newer than 0.13" not in inspect_help


@pytest.fixture
def wide_store(tmp_path: Path) -> Path:
    """Runs with long goals and outcomes, ids up to five digits, calls with big counts."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store, store.transaction():
        for n in range(12):
            run = store.start_run(f"goal {n}: " + "refactor the parser module " * 4, "task.md")
            store.checkpoint_step(run, StepRecord(1, "d", "r", tokens=123_456_789))
            usage = Usage(1_234_567, 7_654_321, 8_888_888, 5_555_555)
            store.record_provider_call(
                run, ProviderCall(1, 0, "p", "claude-long-model-name", usage)
            )
            store.finish_run(run, "success after a very long explanation of what happened")
    return path


@pytest.mark.parametrize(
    "args", [("runs", "{db}"), ("spend", "{db}"), ("spend", "{db}", "--by", "run"),
             ("trace", "{db}", "1"), ("memory", "{db}", "/repo"), ("size", "{db}")],
    ids=" ".join,
)  # fmt: skip
def test_tables_fit_80_columns(args: tuple[str, ...], wide_store: Path) -> None:
    code, out = on_terminal(*(a.format(db=wide_store) for a in args), columns=80)
    assert code == 0, out
    lines = ANSI.sub("", out).splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)


def test_runs_at_80_columns_keeps_every_id(wide_store: Path) -> None:
    code, out = on_terminal("runs", wide_store, "--all", columns=80)
    assert code == 0, out
    ids = [line.split()[0] for line in ANSI.sub("", out).splitlines()[2:] if line.strip()]
    assert ids == [str(n) for n in range(12, 0, -1)]


def test_spend_by_model_fits_80_columns_on_a_real_store(tmp_path: Path) -> None:
    """On a terminal and piped (where nothing is cut) alike, at `COLUMNS=80`."""
    from conftest import copy_fixture

    path = copy_fixture("io-harness-0.29.0/aggregates", tmp_path)
    Store.open(path).close()  # upgraded
    code, out = on_terminal("spend", path, "--by", "model", columns=80)
    assert code == 0, out
    piped = run_in_process("spend", path, "--by", "model", env={"COLUMNS": "80"})
    assert piped.returncode == 0, piped.stderr
    for shown in (ANSI.sub("", out), piped.stdout):
        assert "fixture-model" in shown
        assert max(len(line) for line in shown.splitlines()) <= 80, shown


def test_runs_at_80_columns_keeps_the_outcome_ahead_of_how_long_it_took(
    wide_store: Path,
) -> None:
    """At 80 columns `runs` left out the outcome and kept "took": a run finished with a
    failure read as `completed`. What a person needs to judge a run goes last."""
    code, out = on_terminal("runs", wide_store, columns=80)
    assert code == 0, out
    lines = ANSI.sub("", out).splitlines()
    header = next(line for line in lines if line.split()[:1] == ["id"])
    assert "outcome" in header.split() and "took" not in header.split(), header
    assert any(line.startswith("(not shown at 80 columns: parent") for line in lines), out
    row = lines[lines.index(header) + 1]
    assert "success" in row, row


def test_the_exit_codes_listed_are_the_ones_the_command_uses() -> None:
    """`--help` listed the codes to 6 and the guide to 130, each missing the other's: both
    list every code the command exits with."""
    from harness_store.cli.check import EXIT_UNHEALTHY

    command = importlib.import_module("harness_store.cli.app")  # the module, not its `app`

    used = {
        0,
        command.EXIT_OTHER,
        command.EXIT_USAGE,
        command.EXIT_NOT_A_STORE,
        command.EXIT_LOCKED,
        command.EXIT_NOT_FOUND,
        EXIT_UNHEALTHY,
        command.EXIT_INTERRUPTED,
    }
    top = run_in_process("--help").stdout
    listed = top[top.index("Exit codes") :]
    in_help = {int(m) for m in re.findall(r"^\s*(\d+)  \S", listed, flags=re.MULTILINE)}
    guide = (REPO / "docs" / "guides" / "cli.md").read_text()
    in_guide = {int(m) for m in re.findall(r"^\| (\d+) \|", guide, flags=re.MULTILINE)}
    assert in_help == used
    assert in_guide == used
