"""Memory as of io-harness 0.66 on both backends: kinds and the pin rule, caller-chosen caps,
eviction ranked by recalls, restore points, forget, similarity, summaries and todos."""

from __future__ import annotations

import pytest

from harness_store import (
    MemoryForget,
    MemoryLimits,
    MemorySnapshot,
    MemoryWrite,
    Store,
    TodoItem,
    TodoState,
)
from harness_store.errors import InvalidValueError
from harness_store.store.notes import TODO_MAX_ITEMS, TODO_TEXT_CAP

WS = "/ws"


def test_a_pinned_entry_refuses_a_write_and_keeps_no_restore_point_for_it(store: Store) -> None:
    run = store.start_run("g", "f")
    assert store.memory_write(WS, "k", "v1", run, 1, "decision") == MemoryWrite()
    assert store.memory_pin(WS, "k", True) is True
    other = store.start_run("g2", "f")
    assert store.memory_write(WS, "k", "v2", other, 2) == MemoryWrite(refused=True)
    entry = store.memory_get(WS, "k")
    assert entry is not None and (entry.value, entry.kind, entry.pinned) == ("v1", "decision", True)
    assert store.memory_snapshots(other) == []
    assert store.memory_snapshots(run) == [MemorySnapshot(WS, "k", None, None, 1, True)]
    assert store.memory_pin(WS, "absent", True) is False


def test_caps_chosen_by_the_caller_cut_and_evict_as_upstream(store: Store) -> None:
    run = store.start_run("g", "f")
    small = MemoryLimits(max_entries=2, max_chars=40, max_entry_chars=12)
    assert store.memory_write_with(WS, "k0", "a" * 20, run, 1, "fact", small).evicted == []
    assert store.memory_get(WS, "k0").value == "a" * 0 + "…[truncated]"  # type: ignore[union-attr]
    store.memory_write_with(WS, "k1", "𝄞" * 12, run, 1, "fact", small)
    assert store.memory_get(WS, "k1").value == "𝄞" * 12  # type: ignore[union-attr]
    assert store.memory_write_with(WS, "k2", "third", run, 1, "fact", small).evicted == ["k0"]
    with pytest.raises(InvalidValueError):
        store.memory_write_with(WS, "k3", "v", run, 1, "fact", MemoryLimits(max_entries=-1))
    with pytest.raises(InvalidValueError):
        store.memory_write(WS, "k3", "v", run, 1, "opinion")
    assert store.memory_get(WS, "k3") is None


def test_eviction_ranks_by_distinct_recalling_runs_then_last_recall_then_age(store: Store) -> None:
    run = store.start_run("g", "f")
    limits = MemoryLimits(max_entries=3, max_chars=10_000, max_entry_chars=100)
    for key in ("old_proven", "young_once", "never"):
        store.memory_write_with(WS, key, key, run, 1, "fact", limits)
    store.record_memory_recall(101, 1, WS, ["old_proven"])
    store.record_memory_recall(102, 1, WS, ["old_proven", "young_once"])
    store.record_memory_recall(102, 2, WS, ["young_once"])  # one run twice counts once
    assert store.memory_write_with(WS, "n1", "v", run, 2, "fact", limits).evicted == ["never"]
    assert store.memory_write_with(WS, "n2", "v", run, 2, "fact", limits).evicted == ["n1"]
    assert [r.key for r in store.memory_recalls(102)] == ["old_proven", "young_once", "young_once"]


def test_forget_takes_a_restore_point_drops_recalls_and_refuses_a_pin(store: Store) -> None:
    run = store.start_run("g", "f")
    store.memory_write(WS, "a", "alpha", run, 1, "decision")
    store.memory_write(WS, "p", "pinned", run, 1)
    store.memory_pin(WS, "p", True)
    store.record_memory_recall(run, 1, WS, ["a", "p"])
    later = store.start_run("g2", "f")
    assert store.memory_forget(WS, "a", later, 4) is MemoryForget.REMOVED
    assert store.memory_forget(WS, "a", later, 5) is MemoryForget.ABSENT
    assert store.memory_forget(WS, "p", later, 5) is MemoryForget.PINNED
    assert store.memory_snapshots(later) == [MemorySnapshot(WS, "a", "alpha", "decision", 4, False)]
    assert [r.key for r in store.memory_recalls(run)] == ["p"]
    assert store.memory_delete(WS, "p") is True and store.memory_clear(WS) == 0


def test_similar_finds_a_restatement_under_another_key_only(store: Store) -> None:
    run = store.start_run("g", "f")
    store.memory_put(WS, "build", "the test command is cargo test --all-features", run, 1)
    store.memory_put("/other", "x", "the test command is cargo test --all-features", run, 1)
    found = store.memory_similar(WS, "how", "the test command here is cargo test --all-features")
    assert found is not None and found.key == "build"
    assert store.memory_similar(WS, "ed", "the maintainer reviews on Tuesdays") is None
    assert (
        store.memory_similar(WS, "build", "the test command is cargo test --all-features") is None
    )
    assert store.memory_similar(WS, "k", "a b c") is None  # no word of three characters


def test_summaries_newest_fold_wins_and_todos_are_capped_and_replaced(store: Store) -> None:
    run = store.start_run("g", "f")
    first = store.put_summary(run, 4, 3, "first", 10)
    second = store.put_summary(run, 5, 3, "corrected", 2**63 - 1)
    assert store.summary_for(run, 3).id == second  # type: ignore[union-attr]
    assert store.summary_for(run, 9) is None
    assert [s.id for s in store.summaries(run)] == [first, second]
    assert store.summaries(run)[1].est_tokens == 2**63 - 1

    many = [TodoItem("x" * (TODO_TEXT_CAP + 5), TodoState.PENDING)] * (TODO_MAX_ITEMS + 3)
    assert store.write_todos(run, many) == 3
    got = store.todos(run)
    assert len(got) == TODO_MAX_ITEMS and len(got[0].text) == TODO_TEXT_CAP
    assert store.write_todos(run, [TodoItem.new("a", TodoState.DONE)]) == 0
    assert store.todos(run) == [TodoItem("a", TodoState.DONE)]
    assert store.write_todos(run, []) == 0 and store.todos(run) == []
