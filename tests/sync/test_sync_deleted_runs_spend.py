"""A run deleted in the source leaves the centre whole at the next pass: with its rows, its
spend rows (`hs_spend_runs`, `hs_spend_priced_runs`) go too, as a prune's and a session
deletion's do, so no spend row names a run the centre does not hold."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool
from support.synccheck import mirror_problems

from harness_store import Price, PriceTable, ProviderCall, StepRecord, Store, Usage
from harness_store.sync import sync


def source_with_calls(path: Path, runs: int) -> list[int]:
    """A host store whose finished runs each made a provider call."""
    ids = []
    with Store.open(path) as store:
        for n in range(runs):
            run = store.start_run(f"goal {n}", "plan.toml")
            store.checkpoint_step(run, StepRecord(1, "d", "ok", tokens=3))
            store.record_provider_call(run, ProviderCall(1, 1, "p", "m", Usage(2, 1, 3), 5))
            store.finish_run(run, "success")
            ids.append(run)
    return ids


def orphan_spend_rows(target: str) -> dict[str, int]:
    """Per spend table, its rows naming a run the centre does not hold."""
    url = target if "://" in target else f"sqlite:///{target}"
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return {
                table: int(
                    conn.execute(
                        text(
                            f"SELECT count(*) FROM {table} WHERE run_id NOT IN "
                            "(SELECT id FROM runs)"
                        )
                    ).scalar_one()
                )
                for table in ("hs_spend_runs", "hs_spend_priced_runs")
            }
    finally:
        engine.dispose()


def test_a_run_deleted_in_the_source_takes_its_spend_rows_from_the_centre(
    tmp_path: Path, store_target: str
) -> None:
    source = tmp_path / "host.sqlite3"
    runs = source_with_calls(source, 4)
    sync([source], store_target)
    with Store.open(store_target) as centre:
        centre.spend_by_run(PriceTable.new("x").with_("m", Price(input=1)))  # priced
    doomed = runs[1]
    with closing(sqlite3.connect(source)) as conn, conn:  # as a foreign prune deletes it
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            if "run_id" in columns:
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (doomed,))
        conn.execute("DELETE FROM runs WHERE id = ?", (doomed,))
    report = sync([source], store_target)
    assert report.origins[0].counts.deleted["runs"] == 1
    assert mirror_problems(store_target, source) == []
    assert orphan_spend_rows(store_target) == {"hs_spend_runs": 0, "hs_spend_priced_runs": 0}
