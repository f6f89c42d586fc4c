"""`harness-store copy` into a database whose tables hold no rows (what `harness-store upgrade
URL` builds) goes ahead; one with rows is refused and changed in nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.clirun import run_in_process
from support.synccheck import write_source

from harness_store import Store
from harness_store.transfer import TargetNotEmptyError, copy_store


@pytest.mark.slow_on("postgresql")
def test_copy_into_a_freshly_upgraded_store_goes_ahead(store_target: str, tmp_path: Path) -> None:
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=2)
    built = run_in_process("upgrade", store_target)
    assert built.returncode == 0, built.stderr
    copied = run_in_process("copy", source, store_target)
    assert copied.returncode == 0, copied.stderr
    with Store.open(store_target, read_only=True) as store, Store.open(source) as src:
        assert store.runs() == src.runs()
        assert [s.step for s in store.steps(1)] == [s.step for s in src.steps(1)]


def test_copy_into_a_store_with_rows_is_refused(store_target: str, tmp_path: Path) -> None:
    source = tmp_path / "agent.sqlite3"
    write_source(source, runs=1)
    with Store.open(store_target) as store:
        kept = store.start_run("kept", "/x")
    with pytest.raises(TargetNotEmptyError, match="with rows"):
        copy_store(source, store_target)
    with Store.open(store_target, read_only=True) as store:
        assert store.runs() == [kept]
