"""Writers naming runs while `prune_runs(archive=…)` deletes them (real processes, both
backends): a provider call or policy event acknowledged while its run is pruned is in the store
or in the archive, never lost between a batch's copy and its delete; and a child started under
an old root while its batch is deciding is never left running under a root the batch deleted —
the root stays (the tree is in use) or the child came after the root was gone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from support.processes import Worker

from harness_store import Store
from harness_store.models import Base
from harness_store.records import PolicyEvent, ProviderCall, StepRecord
from harness_store.records.health import FindingKind

from .test_run_pruning_archive import url_of

HERE = Path(__file__).parent
RUNS = 300


def fill(target: str) -> list[int]:
    """RUNS completed root runs of two steps each."""
    runs = []
    with Store.open(target, backup=False) as store, store.transaction():
        for i in range(RUNS):
            run = store.start_run(f"goal {i}", "plan.toml")
            for step in (1, 2):
                store.checkpoint_step(run, StepRecord(step, "decide", "ok", tokens=1))
            store.finish_run(run, "success")
            runs.append(run)
    return runs


def values(target: str | Path, name: str, column: str) -> set[str]:
    engine = create_engine(url_of(target))
    t = Base.metadata.tables[name]
    with engine.connect() as conn:
        found = {str(v) for v in conn.execute(select(t.c[column])).scalars()}
    engine.dispose()
    return found


def race(target: str, archive: Path, mode: str, runs: list[int]) -> Worker:
    """A writer (`mode`) started, then a prune in batches of about 10 rows into `archive`;
    the writer's acknowledgements once both ended."""
    ids = [str(run) for run in runs]
    writer = Worker([sys.executable, str(HERE / "retention_worker.py"), mode, target, *ids])
    writer.wait_line("ready", timeout=120)
    pruner = Worker([sys.executable, str(HERE / "retention_pruner.py"), target, str(archive), "10"])
    assert pruner.finish(timeout=600) == 0, pruner.stderr
    if mode == "children":  # the roots it holds stay in use: it would go on; stop it
        writer.kill()
    else:
        assert writer.finish(timeout=300) == 0, writer.stderr
    return writer


@pytest.mark.slow_on("sqlite")
def test_calls_acknowledged_during_an_archiving_prune_are_never_lost(
    tmp_path: Path, store_target: str
) -> None:
    archive = tmp_path / "archive.sqlite3"
    writer = race(store_target, archive, "calls", fill(store_target))
    calls = {f"m{line.split()[1]}" for line in writer.lines if line.startswith("call ")}
    events = {f"t{line.split()[1]}" for line in writer.lines if line.startswith("event ")}
    assert len(calls) > 50 and len(events) > 50, (len(calls), len(events))
    kept_calls = values(store_target, "provider_calls", "model") | values(
        archive, "provider_calls", "model"
    )
    kept_events = values(store_target, "policy_events", "target") | values(
        archive, "policy_events", "target"
    )
    assert sorted(calls - kept_calls) == [] and sorted(events - kept_events) == []


@pytest.mark.slow_on("sqlite")
def test_a_child_started_while_its_tree_is_pruned_never_splits_the_tree(
    tmp_path: Path, store_target: str
) -> None:
    archive = tmp_path / "archive.sqlite3"
    writer = race(store_target, archive, "children", fill(store_target))
    children = [line.split() for line in writer.lines if line.startswith("child ")]
    seen = [(int(c), int(p)) for _, c, p, state in children if state == "seen"]
    # Children went under roots the prune was taking: a race happened. (One started after
    # its root's batch committed names a root that is gone, as upstream allows.)
    assert len(children) > 10 and seen, children[:20]
    with Store.open(store_target, backup=False) as store:
        present = set(store.runs())
        for child, parent in seen:
            # The parent was there after the child committed: its tree was in use from then
            # on, so the prune kept it whole.
            assert child in present and parent in present, (child, parent)
            assert store.status(child) == "running"
    assert not set(values(archive, "runs", "id")) & {str(c) for c, _ in seen}


def test_writes_naming_a_pruned_run_are_upstreams_and_check_names_them(store: Store) -> None:
    """io-harness 0.66 writes a provider call, a policy event, a child or a lease of any run
    id (its store enforces no foreign keys), so the Store does too after a prune; `check`
    names each row left naming the run that is gone."""
    run = store.start_run("old", "plan.toml")
    store.finish_run(run, "success")
    assert store.prune_runs(before="9999-01-01").run_ids == [run]
    store.record_provider_call(run, ProviderCall(1, 1, "late", "m"))
    store.record_event(run, PolicyEvent(1, "refusal", "exec", "late"))
    child = store.start_child_run("late child", "plan.toml", run, 1)
    store.acquire_lease(run, 60).release()
    store.acquire_lease(run, 60)
    assert [c.model for c in store.provider_calls(run)] == ["m"]
    assert [e.target for e in store.events(run)] == ["late"]
    assert store.status(child) == "running"
    kinds = {f.kind for f in store.check().findings if str(run) in str(f)}
    assert {
        FindingKind.ORPHAN,
        FindingKind.MISSING_PARENT,
        FindingKind.LEASE_OF_MISSING_RUN,
    } <= kinds, store.check()
