"""A prune's batches are bounded in time, not only in rows: when its batches take longer than
`SLICE_SECONDS` (a loaded machine, a big store's cache misses, here a costly trigger the
database runs for every deleted step), the next batches are smaller, so a live writer waits
about that long whatever each row costs; and a prune of many smaller batches still takes
every run once."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from harness_store import Store
from harness_store.records import StepRecord
from harness_store.store.run_pruning import BATCH_RUNS, LEAST_RUNS

RUNS = 4 * BATCH_RUNS

SQLITE_SLOW = """
CREATE TRIGGER slow_step_delete AFTER DELETE ON steps BEGIN
    SELECT count(*) FROM (
        WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000)
        SELECT x FROM c
    );
END
"""
POSTGRES_SLOW = [
    """CREATE FUNCTION slow_step_delete() RETURNS trigger LANGUAGE plpgsql AS
       $$ BEGIN PERFORM pg_sleep(0.001); RETURN OLD; END $$""",
    """CREATE TRIGGER slow_step_delete AFTER DELETE ON steps
       FOR EACH ROW EXECUTE FUNCTION slow_step_delete()""",
]


def url_of(target: str) -> str:
    return target if "://" in target else f"sqlite:///{target}"


def slow_deletes(target: str) -> None:
    """Make every deleted step cost the database a few milliseconds (a trigger)."""
    engine = create_engine(url_of(target))
    with engine.begin() as conn:
        for statement in [SQLITE_SLOW] if engine.dialect.name == "sqlite" else POSTGRES_SLOW:
            conn.execute(text(statement))
    engine.dispose()


@pytest.mark.slow_on("postgresql")
def test_batches_that_take_long_are_followed_by_smaller_ones(store_target: str) -> None:
    with Store.open(store_target, backup=False) as store:
        with store.transaction():
            for _ in range(RUNS):
                run = store.start_run("goal", "plan.toml")
                store.checkpoint_step(run, StepRecord(1, "decide", "ok", tokens=1))
                store.finish_run(run, "success")
        slow_deletes(store_target)
        done: list[int] = []
        pruned = store.prune_runs(before="9999-01-01", progress=lambda d, _: done.append(d))
        assert pruned.runs == RUNS and store.runs() == []
        sizes = [b - a for a, b in zip([0, *done], done, strict=False)]
        assert sum(sizes) == RUNS
        # The first batch is a full one (its runs' step rows are few); it takes seconds, so the
        # next ones are a fraction of it, though never under the least a batch shrinks to.
        assert sizes[0] == BATCH_RUNS, sizes
        assert max(sizes[1:]) < BATCH_RUNS // 2, sizes
        assert min(sizes[:-1]) >= LEAST_RUNS, sizes


@pytest.mark.slow_on("postgresql")
def test_a_batch_holds_at_most_batch_runs_however_few_their_rows_and_however_fast(
    store_target: str,
) -> None:
    """Runs without steps weigh almost nothing in rows, yet each costs a lookup in every
    run-keyed table: the first batch takes `BATCH_RUNS` of them, and no batch more, however
    quickly the batches go (the pace only ever shrinks a batch below its full size)."""
    with Store.open(store_target, backup=False) as store:
        with store.transaction():
            for _ in range(2 * BATCH_RUNS + 1):
                store.finish_run(store.start_run("goal", "plan.toml"), "success")
        done: list[int] = []
        pruned = store.prune_runs(before="9999-01-01", progress=lambda d, _: done.append(d))
        assert pruned.runs == 2 * BATCH_RUNS + 1 and store.runs() == []
        sizes = [b - a for a, b in zip([0, *done], done, strict=False)]
        assert sizes[0] == BATCH_RUNS and max(sizes) == BATCH_RUNS, sizes
