"""`Store.prune_runs` on both backends: whole trees or nothing, every row of a pruned run
and nothing else, never a run in use, spend answers still exact, bad input refused."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import create_engine, select, update

from harness_store import Store
from harness_store import models as m
from harness_store.errors import InvalidValueError
from harness_store.models import Base
from harness_store.models.spend import SPEND_METADATA
from harness_store.records import (
    Plan,
    PlanStep,
    Price,
    PriceTable,
    ProviderCall,
    Question,
    StepRecord,
    Usage,
)
from harness_store.store import run_pruning
from harness_store.store.accounting import ROW_KEYS

PRICES = PriceTable.new("2026-11-30").with_("m-a", Price(input=1_250_001, output=3_000_007))


def url_of(target: str) -> str:
    return target if "://" in target else f"sqlite:///{target}"


def finished(
    store: Store, parent: int | None = None, *, steps: int = 2, outcome: str = "success"
) -> int:
    """A run with steps, a provider call and an event, finished with `outcome`."""
    run = (
        store.start_run("goal", "plan.toml")
        if parent is None
        else store.start_child_run("child", "plan.toml", parent, 1)
    )
    for step in range(1, steps + 1):
        store.checkpoint_step(run, StepRecord(step, "decide", "result", tokens=5))
    store.record_provider_call(run, ProviderCall(1, 1, "p", "m-a", Usage(400, 7, 407), 3))
    store.finish_run(run, outcome)
    if outcome == "boom":
        store.set_status(run, "failed")
    return run


def fingerprint(target: str, tables: Any = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (io-harness's and harness_store's spend tables), sorted."""
    engine = create_engine(url_of(target))
    out = {}
    with engine.connect() as conn:
        for t in [*Base.metadata.sorted_tables, *SPEND_METADATA.sorted_tables]:
            rows = conn.execute(select(t)).all()
            out[t.name] = sorted(tuple(map(repr, r)) for r in rows)
    engine.dispose()
    return out


def make_old(target: str, *runs: int) -> None:
    with Store.open(target, backup=False) as direct, direct._write() as conn:
        conn.execute(
            update(m.Run).where(m.Run.id.in_(runs)).values(started_at="2020-01-01T00:00:00.000Z")
        )


def test_a_tree_goes_whole_only_when_every_run_of_it_qualifies(store_target: str) -> None:
    with Store.open(store_target, backup=False) as store:
        done = finished(store)
        done_child = finished(store, done)
        failed = finished(store, outcome="boom")
        mixed = finished(store)
        mixed_child = store.start_child_run("still going", "plan.toml", mixed, 1)
        recent = finished(store)
        make_old(store_target, done, done_child, failed, mixed, mixed_child)
        before = fingerprint(store_target)
        dry = store.prune_runs(before="2021-01-01", dry_run=True)
        assert fingerprint(store_target) == before
        pruned = store.prune_runs(before="2021-01-01")
        assert pruned == dry and pruned.tables == dry.tables and pruned.run_ids == dry.run_ids
        assert pruned.run_ids == [done, done_child, failed] and pruned.runs == 3
        assert set(store.runs()) == {mixed, mixed_child, recent}
        after = fingerprint(store_target)
        gone = {done, done_child, failed}
        for name, rows in before.items():
            if name == "hs_spend_days":
                continue  # a change counter: the deletion moves it (the spend test checks it)
            # every row that named a pruned run went, every other row is untouched
            kept = [r for r in rows if not names_a_run(name, r, gone)]
            assert after[name] == kept, name
        assert pruned.rows == sum(len(before[n]) - len(after[n]) for n in before)
        assert after["hs_spend_days"][0][2] > before["hs_spend_days"][0][2]
        assert pruned.tables["steps"] == 6 and pruned.tables["provider_calls"] == 3
        assert pruned.tables["runs"] == 3 and pruned.tables["hs_spend_runs"] == 3
        only_failed = store.prune_runs(before="9999-01-01", statuses=("failed",), dry_run=True)
        assert only_failed.runs == 0


def names_a_run(name: str, row: tuple[str, ...], runs: set[int]) -> bool:
    """Whether a fingerprinted row belongs to one of `runs` (by its run-keyed column)."""
    t = Base.metadata.tables[name] if name in Base.metadata.tables else SPEND_METADATA.tables[name]
    columns = [c.name for c in t.columns]
    keys = {
        "runs": "id",
        "spawns": "parent_run_id",
        "agent_queue": "parent_run_id",
        "agent_messages": "to_run_id",
    }
    key = keys.get(name, "run_id")
    if (
        name in ("memory", "sessions", "session_turns", "hs_spend_days", "hs_spend_priced_days")
        or key not in columns
    ):
        return False
    return int(row[columns.index(key)]) in runs


@pytest.mark.parametrize(
    "use", ["lease", "approval", "question", "plan", "session", "paused", "running"]
)
@pytest.mark.slow_on("postgresql")
def test_a_run_in_use_is_never_pruned_whatever_its_date(store_target: str, use: str) -> None:
    with Store.open(store_target, backup=False) as store:
        root = finished(store)
        child = finished(store, root)
        other = finished(store)
        if use == "lease":
            store.acquire_lease(child, 600)
        elif use == "approval":
            store.put_pending(child, 1, "write", "/etc/passwd", None)
        elif use == "question":
            store.put_question(child, 1, Question("which?", None, ["a", "b"]))
        elif use == "plan":
            store.put_plan(child, 1, Plan([PlanStep("do it", None)]))
        elif use == "session":
            session = store.create_session("/ws")
            store.record_turn(session, None, root, "hi")
        else:
            store.set_status(child, use)
        make_old(store_target, root, child, other)
        pruned = store.prune_runs(before="2021-01-01")
        assert pruned.run_ids == [other]
        assert sorted(store.runs()) == [root, child]
        assert len(store.steps(child)) == 2
        # in use (not merely unfinished): named among the kept
        assert pruned.refused == ([] if use in ("paused", "running") else [root])


def test_keep_last_keeps_the_newest_trees_of_those_statuses(store_target: str) -> None:
    with Store.open(store_target, backup=False) as store:
        runs = [finished(store) for _ in range(5)]
        make_old(store_target, *runs)
        pruned = store.prune_runs(before="2021-01-01", keep_last=2)
        assert pruned.run_ids == runs[:3]
        assert sorted(store.runs()) == runs[3:]
        assert store.prune_runs(before="2021-01-01", keep_last=2).runs == 0
        assert store.prune_runs(before="2021-01-01", keep_last=0).run_ids == runs[3:]


@pytest.mark.slow_on("postgresql")
def test_spend_answers_stay_exact_after_a_prune(store_target: str) -> None:
    with Store.open(store_target, backup=False) as store:
        runs = [finished(store) for _ in range(4)]
        for by in ("model", "day", "run"):
            getattr(store, f"spend_by_{by}")(PRICES)  # kept answers, to be invalidated
        make_old(store_target, *runs[:2])
        assert store.prune_runs(before="2021-01-01").runs == 2
        for by in ("model", "day", "run"):
            want = store._spend_exact(PRICES, ROW_KEYS[by], None)
            assert getattr(store, f"spend_by_{by}")(PRICES) == want, by
        assert [s.key for s in store.spend_by_run(PRICES)] == [str(r) for r in runs[2:]]
        assert sum(s.calls for s in store.spend_by_model(PRICES)) == 2


@pytest.mark.parametrize(
    "arguments",
    [
        {"before": "last tuesday"},
        {"before": 20210101},
        {"before": "2021-01-01", "statuses": ("running",)},
        {"before": "2021-01-01", "statuses": "completed"},
        {"before": "2021-01-01", "statuses": ()},
        {"before": "2021-01-01", "keep_last": -1},
        {"before": "2021-01-01", "keep_last": "3"},
        {"before": "2021-01-01", "archive": "postgresql://x/y"},
    ],
)
@pytest.mark.slow_on("postgresql")
def test_bad_arguments_are_refused_and_change_nothing(
    store_target: str, arguments: dict[str, Any]
) -> None:
    with Store.open(store_target, backup=False) as store:
        run = finished(store)
        make_old(store_target, run)
        before = fingerprint(store_target)
        with pytest.raises(InvalidValueError):
            store.prune_runs(**arguments)
        assert fingerprint(store_target) == before


@pytest.mark.slow_on("postgresql")
def test_batches_each_decide_again_and_report_progress(store_target: str) -> None:
    with Store.open(store_target, backup=False) as store:
        runs = [finished(store, steps=10) for _ in range(12)]
        make_old(store_target, *runs)
        seen: list[tuple[int, int]] = []
        pruned = store.prune_runs(
            before="2021-01-01", batch_rows=45, progress=lambda d, t: seen.append((d, t))
        )
        assert pruned.runs == 12 and pruned.tables["steps"] == 120
        assert len(seen) == 6 and seen[-1] == (12, 12)
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)


@pytest.mark.slow_on("postgresql")
def test_deciding_a_page_of_runs_at_a_time_decides_as_one_look(
    store_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forecast reads the runs a page at a time (`FORECAST_RUNS`); trees split across
    pages, busy and unfinished trees and `keep_last` come out as from one read of them all."""
    with Store.open(store_target, backup=False) as store:
        roots = [finished(store) for _ in range(7)]
        children = [finished(store, root) for root in roots[:4]]  # after every root: split
        grandchild = finished(store, children[1])
        busy = store.start_child_run("still going", "plan.toml", roots[2], 1)
        store.acquire_lease(roots[5], 600)
        make_old(store_target, *roots, *children, grandchild, busy)
        whole = {
            keep: store.prune_runs(before="2021-01-01", keep_last=keep, dry_run=True)
            for keep in (None, 1, 3)
        }
        monkeypatch.setattr(run_pruning, "FORECAST_RUNS", 2)
        for keep, answer in whole.items():
            paged = store.prune_runs(before="2021-01-01", keep_last=keep, dry_run=True)
            assert (paged.run_ids, paged.refused) == (answer.run_ids, answer.refused), keep
        # Root 2's tree has a run still going; root 5 is leased; 4, 5 and 6 are the newest
        # three trees of those statuses.
        oldest = [roots[0], children[0], roots[1], children[1], grandchild, roots[3], children[3]]
        assert whole[None].run_ids == sorted([*oldest, roots[4], roots[6]])
        assert whole[None].refused == [roots[5]]
        assert whole[3].run_ids == sorted(oldest)
        pruned = store.prune_runs(before="2021-01-01", keep_last=1)
        assert pruned.run_ids == whole[1].run_ids
