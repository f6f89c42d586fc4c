"""A pass over a source one of whose runs the centre holds back costs what changed, as a
clean pass does: the held run's rows, which the centre's id maps lack, are counted out of the
source's rows when the pass tells a deletion from the counts (`finding.ChangedRows.
_counts_agree`), so the big state tables are still read in part, whatever the source's size.
The held run is still named, and sent whole once repaired."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.big_stores import runs_store
from support.pg_proxy import PgProxy
from support.synccheck import mirror_problems

from harness_store.sync import quarantined, sync
from sync.test_quarantine_pass_cost import repair, spoil
from sync.test_sync_changed_rows import add_run, source_steps, widened

HELD = 7
"""The run whose first row holds a value the centre cannot hold (a turn of no session)."""


@pytest.mark.slow_on("postgresql")
def test_a_one_run_pass_with_a_held_run_reads_as_much_of_a_source_four_times_bigger(
    tmp_path: Path, store_target: str
) -> None:
    """Before: the held run made the runs table's counts disagree with its id map every
    pass, so every state table was compared whole: four times the rows, four times the
    steps. The source's sessions hold a few turns: a held run's turns are still found by a
    scan of the turns (the source indexes no turn's run), which this test leaves out."""
    steps = {}
    for runs in (4_000, 16_000):
        source = runs_store(tmp_path / f"host-{runs}.sqlite3", runs)
        with closing(sqlite3.connect(source)) as conn, conn:
            conn.execute("DELETE FROM session_turns WHERE id > 10")
        spoiled = spoil(source, store_target, HELD)
        alone = runs == 4_000 or store_target.startswith("postgresql")
        centre = store_target if alone else str(tmp_path / "centre-big.sqlite3")
        sync([source], centre)  # the first pass: sent whole, the run held
        add_run(source)
        sync([source], centre)  # every big table's key high-water mark known
        add_run(source)
        with source_steps(source) as counted:
            report = sync([source], centre)
        steps[runs] = counted[0]
        assert [q.run for q in report.origins[0].quarantined] == [HELD]
        assert report.rows > 0
        repair(source, *spoiled)
        assert list(sync([source], centre).origins[0].released) == [HELD]
        assert mirror_problems(centre, source) == []
    assert steps[16_000] <= 1.5 * steps[4_000], steps


@pytest.mark.slow  # 40 s of sources; the default tier keeps the SQLite half of the reads test
def test_a_one_run_pass_with_a_held_run_sends_as_many_statements_whatever_the_source(
    pg_url: str, tmp_path: Path
) -> None:
    """What a one-run pass over a source holding a run back sends the centre does not grow
    with the source: as many statements and round trips for either size."""
    proxy = PgProxy(pg_url)
    sent: dict[int, tuple[int, int]] = {}
    try:
        for runs in (6_000, 24_000):  # every state table big (read in part) at either
            source = widened(tmp_path / f"host-{runs}.sqlite3", runs, turns=False)
            spoil(source, pg_url, HELD)
            sync([source], proxy.url)
            add_run(source)
            sync([source], proxy.url)  # every big table's marks known
            add_run(source)
            sync([source], proxy.url)  # its pages checked a moment ago: not again
            add_run(source)
            with proxy.counting() as messages:
                sync([source], proxy.url)
                sent[runs] = (proxy.statements(messages), messages[b"S"])
            held = [q.run for q in quarantined(pg_url) if q.source == str(source.resolve())]
            assert held == [HELD]
    finally:
        proxy.close()
    assert sent[24_000] == sent[6_000], sent
