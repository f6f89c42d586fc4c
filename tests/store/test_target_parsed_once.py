"""A store target is parsed once, at the edge (`targets.Target.parse`), into one value that
flows inward unchanged: opening a store for writing (`Store.open`, a CLI decision) or for
reading (the read commands' read-only open) parses the path or URL string one time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL

from harness_store import Store, targets
from harness_store.cli.decide import open_writer
from harness_store.cli.reader import open_reader


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Each path or URL string turned into a URL from now on (a URL or a parsed target
    passed on is no parse)."""
    seen: list[object] = []
    real = targets.url_of

    def counted(target: Any) -> URL:
        if not isinstance(target, URL | targets.Target):
            seen.append(target)
        return real(target)

    monkeypatch.setattr(targets, "url_of", counted)
    yield seen


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        store.start_run("goal", "a.md")
    return path


def test_a_write_open_parses_its_target_once(store_file: Path, parses: list[object]) -> None:
    with Store.open(str(store_file)) as store:
        assert store.runs() == [1]
    assert parses == [str(store_file)]


def test_a_cli_decision_parses_its_target_once(store_file: Path, parses: list[object]) -> None:
    with open_writer(str(store_file)) as store:
        assert store.runs() == [1]
    assert parses == [str(store_file)]


def test_a_read_command_parses_its_target_once(store_file: Path, parses: list[object]) -> None:
    with open_reader(str(store_file)) as reader:
        assert reader.store.runs() == [1]
    assert parses == [str(store_file)]


def test_a_parsed_target_is_passed_on_as_it_is() -> None:
    parsed = targets.Target.parse("/tmp/a.sqlite3")
    assert targets.Target.parse(parsed) is parsed
    assert parsed.path == Path("/tmp/a.sqlite3") and not parsed.memory
    assert targets.Target.parse(parsed, read_only=True).read_only
    assert targets.Target.parse(":memory:").memory
    assert targets.Target.parse("postgresql://u@h/db").path is None
