"""Store targets parsed once at the edge: `:memory:` is `Store.memory()`, and a file path is a
file name whatever characters it holds (`?`, `#`, `mode=memory`)."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support import legacy

from harness_store import (
    CheckpointEvent,
    StepRecord,
    Store,
)
from harness_store.engine import sqlite_path, to_url
from harness_store.errors import UpgradeRequiredError


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


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_in_memory_store_has_the_same_api_and_nothing_is_shared() -> None:
    first, second = Store.memory(), Store.memory()
    try:
        run = first.start_run("goal", "root")
        first.checkpoint_step(run, StepRecord(1, "act", "ok", "", "", 5))
        first.memory_put("ws", "k", "v", run, 1)
        first.finish_run(run, "success")
        summary = first.run_summary(run)
        assert summary is not None and (summary.steps, summary.tokens) == (1, 5)
        assert first.checkpoint_events(run) == [CheckpointEvent.checkpoint(run, 1)]
        first.check_resumable(run)
        assert second.runs() == [] and second.memory_list("ws") == []
    finally:
        first.close()
        second.close()


def test_read_only_open_reads_and_never_writes(tmp_path: Path, fixture_copy: Any) -> None:
    """`Store.open(read_only=True)`: reads a 0.13-or-newer store as it is (even a read-only
    file), refuses an older one, and turns every write into `StoreAccessError`."""
    from harness_store.errors import StoreAccessError

    path = fixture_copy("io-harness-0.22.0/interrupted")
    path.chmod(0o444)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with Store.open(path, read_only=True) as store:
        assert store.tree_run_ids(1) == [1, 2, 3]
        assert store.spent_tokens_tree(1) == 400
        with pytest.raises(StoreAccessError):
            store.start_run("g", "f")
        with pytest.raises(StoreAccessError):
            store.checkpoint_step(1, StepRecord(9, "a", "b"))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest

    old = tmp_path / "old.sqlite3"
    legacy.build_born_at(old, "0.5")
    digest = hashlib.sha256(old.read_bytes()).hexdigest()
    with pytest.raises(UpgradeRequiredError, match="harness-store upgrade"):
        Store.open(old, read_only=True)
    assert hashlib.sha256(old.read_bytes()).hexdigest() == digest
