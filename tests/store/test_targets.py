"""Store targets parsed once at the edge: `:memory:` is `Store.memory()`, and a file path is a
file name whatever characters it holds (`?`, `#`, `mode=memory`)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from harness_store import StepRecord, Store
from harness_store.engine import sqlite_path, to_url


def test_open_memory_is_a_working_in_memory_store() -> None:
    with Store.open(":memory:") as store:
        run = store.start_run("goal", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
        assert [s.step for s in store.steps(run)] == [1]


@pytest.mark.parametrize(
    "name", ["a?b.sqlite3", "a#b.sqlite3", "x?mode=memory.sqlite3", "p%20q.sqlite3"]
)
def test_a_path_with_url_characters_opens_that_very_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    assert sqlite_path(to_url(str(path))) == path
    with Store.open(path) as store:
        run = store.start_run("goal", "out.txt")
        store.checkpoint_step(run, StepRecord.new(1, "d", "r"))
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite3") == [name]
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT count(*) FROM steps").fetchone() == (1,)
    with Store.open(path, read_only=True) as reader:
        assert [s.step for s in reader.steps(run)] == [1]
