"""The listings `harness-store` prints, as the Store reads them: runs a page at a time, their
count, memory workspaces, rows per table, journal mode and size — on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_store import Store
from harness_store.errors import InvalidValueError
from harness_store.store.listings import Listings


def test_runs_come_a_page_at_a_time_newest_first(store_target: str) -> None:
    with Store.open(store_target) as store:
        runs = [store.start_run(f"goal {n}", "a.rs") for n in range(7)]
        for run in runs[::2]:
            store.finish_run(run, "success")
        pages, before = [], None
        while page := Listings(store).run_page(before=before, limit=3):
            pages.append([r.run_id for r in page])
            before = page[-1].run_id
        assert pages == [runs[::-1][0:3], runs[::-1][3:6], runs[::-1][6:]]
        finished = Listings(store).run_page(status="completed", limit=10)
        assert [r.run_id for r in finished] == runs[::2][::-1]
        assert all(r.success is True and r.outcome == "success" for r in finished)
        newest = Listings(store).run_page(limit=1)[0]
        assert (newest.goal, newest.status, newest.success) == ("goal 6", "completed", True)
        assert Listings(store).run_page(status="running", limit=10)[0].success is None
        assert Listings(store).count_runs() == 7
        assert Listings(store).count_runs(status="completed") == 4
        assert Listings(store).count_runs(status="paused") == 0
        with pytest.raises(InvalidValueError):
            Listings(store).run_page(limit=-1)


def test_workspaces_rows_journal_and_size(store_target: str) -> None:
    with Store.open(store_target) as store:
        assert Listings(store).memory_workspaces() == []
        run = store.start_run("g", "a.rs")
        for workspace in ("/b", "/a", "/b"):
            store.memory_put(workspace, f"k{len(workspace)}", "v", run, 1)
        assert Listings(store).memory_workspaces() == ["/a", "/b"]
        counts = Listings(store).row_counts()
        assert counts["runs"] == 1 and counts["memory"] == 2 and counts["steps"] == 0
        assert "alembic_version" not in counts
        assert Listings(store).database_bytes() > 0
        if "://" in store_target:
            assert Listings(store).journal_mode() is None
        else:
            assert Listings(store).journal_mode() == "wal"
            assert Path(store_target).stat().st_size > 0
