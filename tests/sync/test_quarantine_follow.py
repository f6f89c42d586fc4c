"""`harness-store sync --follow` over a fleet where one host holds a value the centre cannot
hold (a NUL in a step's text, text not UTF-8 in a run's goal, into PostgreSQL): a real
follower process, sources written with `sqlite3` and the Store. The clean host's runs keep
arriving; the spoilt run is quarantined byte-exact and named once; repaired in its source, it
arrives whole, exactly once. Every condition is an event or a poll until a generous deadline,
never a time measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.synccheck import write_source

from harness_store import StepRecord, Store
from harness_store.sync import quarantined
from sync.test_follow import Follower, caught_up, reaped
from sync.test_quarantine import NOT_UTF8, NUL, held_rows, raw_rows, repair, spoil

__all__ = ["reaped"]  # the processes a test started are killed after it


def a_run(path: Path, goal: str) -> None:
    """One more finished run of two steps, written by the Store."""
    with Store.open(path) as store:
        run = store.start_run(goal, "/src/late.rs")
        store.checkpoint_steps(
            run, [StepRecord.new(i, "d", "ok").with_trace("p", "t", i) for i in (1, 2)]
        )
        store.finish_run(run, "success")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("table", "column", "value", "said"),
    [("steps", "result", NUL, "NUL"), ("runs", "goal", NOT_UTF8, "not UTF-8")],
    ids=["nul", "not-utf8"],
)
def test_a_fleet_keeps_flowing_past_a_run_the_centre_cannot_hold(
    pg_url: str, tmp_path: Path, table: str, column: str, value: str, said: str
) -> None:
    clean, spoilt = tmp_path / "clean.sqlite3", tmp_path / "spoilt.sqlite3"
    write_source(clean, runs=2, tag="c")
    roots = write_source(spoilt, runs=2, tag="s")
    row = spoil(spoilt, table, column, value, roots[0])
    family = [roots[0], roots[0] + 1]  # the run and its child, which waits for it
    follower = Follower([clean, spoilt], pg_url)

    caught_up(pg_url, clean)
    named = follower.wait(
        lambda e: e["event"] == "pass" and e["source"] == str(spoilt) and e["quarantined"]
    )
    assert [q["run"] for q in named["quarantined"]] == family
    first = named["quarantined"][0]
    assert (first["table"], first["column"], first["row"]) == (table, column, f"id={row}")
    assert said in first["problem"]
    held = {q.run: q for q in quarantined(pg_url)}
    assert sorted(held) == family
    assert held_rows(held[roots[0]]) == raw_rows(spoilt, roots[0])  # byte-exact

    a_run(clean, "late clean")  # the clean host goes on flowing
    caught_up(pg_url, clean)
    a_run(spoilt, "late spoilt")  # so do the spoilt host's other runs; named only once
    later = follower.wait(
        lambda e: e["event"] == "pass" and e["source"] == str(spoilt) and e["rows"] > 0
    )
    assert later["quarantined"] == []

    repair(spoilt, table, column, row)
    released = follower.wait(
        lambda e: e["event"] == "pass" and e["source"] == str(spoilt) and e["released"]
    )
    assert released["released"] == family
    caught_up(pg_url, spoilt)  # the run arrived whole, and nothing twice
    assert quarantined(pg_url) == []
    assert follower.stop() == 0, follower.worker.stderr
    refused = [e for e in follower.events("refused") + follower.events("retrying")]
    assert refused == []
