"""Which ids an export sends, counted at a loopback receiver of the tests' own (it keeps every
copy, where Phoenix and MLflow keep the first): a run's trace and span ids do not change when
other runs are pruned, and another `identity` gives other ids for the same rows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness_store import Store
from harness_store.otel import export
from harness_store.store.trace_export import TraceExport

from .sink import Sink
from .trees import build_tree, write_run


@pytest.fixture
def sink() -> Iterator[Sink]:
    receiver = Sink.start()
    yield receiver
    receiver.stop()


def spans_of_runs(receiver: Sink, run_ids: set[int]) -> set[bytes]:
    """The ids of every span the receiver got in the traces of these runs."""
    traces = {
        span["trace_id"]
        for span in receiver.spans.values()
        if span.get("gen_ai.operation.name") == "invoke_agent" and span["harness.run.id"] in run_ids
    }
    return {i for i, span in receiver.spans.items() if span["trace_id"] in traces}


def finished_tree(store: Store) -> dict[str, int]:
    """A root with a spawned child, each with steps, provider calls and tool calls, finished
    (so a prune may take it)."""
    root = store.start_run("fix the failing test", "/repo")
    write_run(store, root, 2, "claude-sonnet-4-5")
    child = store.start_child_run("write the regression test", "/repo", root, 1)
    store.record_spawn(root, 2, child, "write the regression test", "t.rs", "ok", None, "[]")
    write_run(store, child, 2, "claude-haiku-4-5")
    store.finish_run(child, "success")
    store.finish_run(root, "success")
    return {"root": root, "child": child}


def test_ids_survive_a_prune_of_the_first_runs(store_target: str) -> None:
    with Store.open(store_target) as store:
        old = finished_tree(store)
        new = finished_tree(store)
        first, second = Sink.start(), Sink.start()
        try:
            export(store, endpoint=first.url)
            cutoff = TraceExport(store).run(new["root"]).started_at
            assert cutoff is not None
            pruned = store.prune_runs(before=cutoff)
            assert sorted(pruned.run_ids) == sorted(old.values())
            export(store, endpoint=second.url)
        finally:
            first.stop()
            second.stop()
    kept = spans_of_runs(first, set(new.values()))
    assert kept and kept != set(first.counts)
    assert set(second.counts) == kept  # the survivors' spans, with the ids they had
    assert second.total() == len(kept)


def test_another_identity_gives_other_ids(tmp_path: pytest.TempPathFactory, sink: Sink) -> None:
    with Store.open(f"{tmp_path}/runs.sqlite3") as store:
        build_tree(store)
        export(store, endpoint=sink.url)
        once = set(sink.counts)
        export(store, endpoint=sink.url)
        assert set(sink.counts) == once  # the same rows, the same ids
        export(store, endpoint=sink.url, identity="elsewhere")
    assert len(sink.counts) == 2 * len(once)
    assert all(n == 2 for i, n in sink.counts.items() if i in once)
