"""A type checker sees `AsyncStore`'s methods typed: `mypy --strict` accepts correct calls,
infers their results' types, and rejects a misspelt method and a wrong argument."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SNIPPET = """
from harness_store import AsyncStore, StepRecord

async def main(store: AsyncStore) -> None:
    run = await store.start_run("goal", "out.txt")
    reveal_type(run)
    await store.checkpoint_step(run, StepRecord.new(1, "step", "ok"))
    reveal_type(await store.steps(run))
    async for step in store.iter_steps(run):
        reveal_type(step)
    await store.start_rn("typo")
    await store.start_run(1, "out.txt")
"""


def mypy_cache() -> Path:
    """mypy's cache, kept between runs and clones (`$HS_MYPY_CACHE`, default
    `~/.cache/harness_store/mypy`): checking the package and its dependencies from cold costs
    some 20 s of CPU, and mypy checks each cached module against its source before using it,
    so a warm cache gives the same verdict in well under a second."""
    default = Path.home() / ".cache" / "harness_store" / "mypy"
    return Path(os.environ.get("HS_MYPY_CACHE", default))


@pytest.fixture(scope="module")
def mypy_output(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    directory = tmp_path_factory.mktemp("typing")
    snippet = directory / "snippet.py"
    snippet.write_text(SNIPPET)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(mypy_cache()), str(snippet)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return done.stdout.splitlines()


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SNIPPET.splitlines(), 1) if text in line)


def said(output: list[str], line: int) -> str:
    return " ".join(o for o in output if f"snippet.py:{line}:" in o)


def revealed(output: list[str], line: int) -> str:
    found = re.search(r'Revealed type is "([^"]*)"', said(output, line))
    assert found is not None, output
    return found.group(1).replace("builtins.", "")


def test_results_are_typed(mypy_output: list[str]) -> None:
    assert revealed(mypy_output, line_of("reveal_type(run)")) == "int"
    steps = revealed(mypy_output, line_of("reveal_type(await store.steps"))
    assert steps == "list[harness_store.records.runs.StepRecord]"
    step = revealed(mypy_output, line_of("reveal_type(step)"))
    assert step == "harness_store.records.runs.StepRecord"


def test_a_misspelt_method_is_rejected(mypy_output: list[str]) -> None:
    typo = said(mypy_output, line_of("start_rn"))
    assert '"AsyncStore" has no attribute "start_rn"' in typo


def test_a_wrong_argument_is_rejected(mypy_output: list[str]) -> None:
    wrong = said(mypy_output, line_of("start_run(1"))
    assert 'Argument 1 to "start_run" of "StoreMethods" has incompatible type "int"' in wrong


def test_correct_calls_pass(mypy_output: list[str]) -> None:
    errors = [o for o in mypy_output if ": error:" in o]
    assert len(errors) == 2, mypy_output
