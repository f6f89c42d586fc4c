"""Memory as of io-harness 0.66 on both backends: kinds and the pin rule, caller-chosen caps,
eviction ranked by recalls, restore points, forget, similarity, summaries and todos."""

from __future__ import annotations

import time
from typing import Any

import pytest
from support.upstream_sql import raw, stamp

from harness_store import (
    MEMORY_MAX_CHARS,
    MEMORY_MAX_ENTRIES,
    MEMORY_MAX_ENTRY_CHARS,
    MemoryForget,
    MemoryLimits,
    MemorySnapshot,
    MemoryWrite,
    Store,
    TodoItem,
    TodoState,
)
from harness_store.errors import InvalidValueError
from harness_store.store.summaries_todos import TODO_MAX_ITEMS, TODO_TEXT_CAP

WS = "/ws"


@pytest.mark.slow_on("postgresql")
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


TRUNCATED = "…[truncated]"


def keys(entries: list[Any]) -> list[str]:
    return [e.key for e in entries]


def test_the_entry_count_cap_evicts_oldest_first_and_never_the_new_entry(
    db: Store, ws: str
) -> None:
    for i in range(MEMORY_MAX_ENTRIES):
        assert db.memory_put(ws, f"k{i}", "v", 1, 1) == [], "no eviction under the cap"
    assert len(db.memory_list(ws)) == MEMORY_MAX_ENTRIES

    evicted: list[str] = []
    for i in range(3):
        evicted += db.memory_put(ws, f"new{i}", "v", 2, 2)
    assert evicted == ["k0", "k1", "k2"]

    listed = keys(db.memory_list(ws))
    assert len(listed) == MEMORY_MAX_ENTRIES
    assert "k0" not in listed
    assert all(f"new{i}" in listed for i in range(3))


def test_the_total_chars_cap_evicts_before_the_count_cap_is_reached(db: Store, ws: str) -> None:
    big = "x" * MEMORY_MAX_ENTRY_CHARS
    evicted: list[str] = []
    for i in range(10):  # 10 x 2,000 = 20,000 chars, far below 64 entries
        evicted += db.memory_put(ws, f"k{i}", big, 1, 1)
    assert evicted == ["k0", "k1"], "oldest first, count cap untouched"
    entries = db.memory_list(ws)
    assert len(entries) == 8
    assert sum(len(e.value) for e in entries) == MEMORY_MAX_CHARS


def test_an_oversized_value_is_truncated_with_a_marker_not_rejected(db: Store, ws: str) -> None:
    huge = "é" * (MEMORY_MAX_ENTRY_CHARS * 2)  # multibyte: a byte-wise cut would not be UTF-8
    assert db.memory_put(ws, "k", huge, 1, 1) == []
    entry = db.memory_get(ws, "k")
    assert entry is not None
    assert len(entry.value) == MEMORY_MAX_ENTRY_CHARS
    assert entry.value.endswith(TRUNCATED), "the cut is visible"
    kept = MEMORY_MAX_ENTRY_CHARS - len(TRUNCATED)
    assert entry.value[:kept] == "é" * kept


def _age_workspace(target: str, workspace: str) -> None:
    """Stamp a workspace's entries in the future, as another host whose clock runs ahead
    would; the next write is then the oldest by `created_at`."""
    raw(
        target,
        "UPDATE memory SET created_at = '2999-01-01T00:00:00.000Z' WHERE workspace = ?",
        workspace,
    )


def test_memory_64_entries_fit_and_the_65th_evicts_the_oldest(db: Store, ws: str) -> None:
    db.memory_put(f"{ws}/other", "o", "untouched", 9, 9)
    other_before = db.memory_list(f"{ws}/other")
    for i in range(MEMORY_MAX_ENTRIES):
        assert db.memory_put(ws, f"k{i:02}", f"v{i}", 1, i) == []
    assert keys(db.memory_list(ws)) == [f"k{i:02}" for i in range(MEMORY_MAX_ENTRIES)]
    assert db.memory_put(ws, "k64", "v", 1, 64) == ["k00"]
    listed = keys(db.memory_list(ws))
    assert len(listed) == MEMORY_MAX_ENTRIES
    assert listed[0] == "k01" and listed[-1] == "k64"
    assert db.memory_get(ws, "k00") is None
    assert db.memory_list(f"{ws}/other") == other_before


def test_memory_16000_chars_fit_and_one_more_evicts(db: Store, ws: str) -> None:
    # multibyte and astral characters: the cap counts characters, never bytes
    unit = "é🦀" * (MEMORY_MAX_ENTRY_CHARS // 2)
    for i in range(8):
        assert db.memory_put(ws, f"k{i}", unit, 1, 1) == []
    entries = db.memory_list(ws)
    assert sum(len(e.value) for e in entries) == MEMORY_MAX_CHARS
    assert all(e.value == unit for e in entries)
    assert db.memory_put(ws, "one", "x", 1, 2) == ["k0"]
    assert sum(len(e.value) for e in db.memory_list(ws)) == MEMORY_MAX_CHARS - 2000 + 1


def test_memory_overwrite_counts_the_new_value_not_both(db: Store, ws: str) -> None:
    for i in range(8):
        db.memory_put(ws, f"k{i}", "x" * 1999, 1, 1)
    # 7 x 1,999 + 2,000 = 15,993: the overwrite replaces, so nothing is evicted
    assert db.memory_put(ws, "k3", "y" * 2000, 1, 2) == []
    assert len(db.memory_list(ws)) == 8


def test_memory_value_of_2000_chars_is_kept_and_2001_is_cut(db: Store, ws: str) -> None:
    exact = "".join(chr(0x4E00 + i % 500) for i in range(MEMORY_MAX_ENTRY_CHARS))
    db.memory_put(ws, "exact", exact, 1, 1)
    entry = db.memory_get(ws, "exact")
    assert entry is not None and entry.value == exact

    over = exact + "!"
    db.memory_put(ws, "over", over, 1, 1)
    entry = db.memory_get(ws, "over")
    assert entry is not None
    assert len(entry.value) == MEMORY_MAX_ENTRY_CHARS
    assert entry.value == exact[: MEMORY_MAX_ENTRY_CHARS - len(TRUNCATED)] + TRUNCATED
    # a value that ends in the marker itself but fits is left alone
    db.memory_put(ws, "marker", "short" + TRUNCATED, 1, 1)
    entry = db.memory_get(ws, "marker")
    assert entry is not None and entry.value == "short" + TRUNCATED


def test_memory_overwrite_refreshes_created_at_and_moves_the_key_to_newest(
    db: Store,
    ws: str,
) -> None:
    for k in ("a", "b", "c"):
        db.memory_put(ws, k, "v", 1, 1)
        time.sleep(0.005)
    first = db.memory_get(ws, "a")
    assert first is not None
    db.memory_put(ws, "a", "new value", 2, 7)
    again = db.memory_get(ws, "a")
    assert again is not None
    assert stamp(again.created_at) > stamp(first.created_at)
    assert (again.value, again.run_id, again.step) == ("new value", 2, 7)
    assert keys(db.memory_list(ws)) == ["b", "c", "a"]
    # the refreshed key is no longer the first to go
    for i in range(MEMORY_MAX_ENTRIES - 3):
        db.memory_put(ws, f"f{i}", "v", 1, 1)
    assert db.memory_put(ws, "last", "v", 1, 1) == ["b"]
    assert db.memory_put(ws, "last2", "v", 1, 1) == ["c"]
    assert db.memory_get(ws, "a") is not None


def test_memory_never_evicts_the_entry_just_written(db: Store, ws: str, db_target: str) -> None:
    for i in range(8):  # 16,000 chars, stamped ahead of the next write
        db.memory_put(ws, f"k{i}", "x" * MEMORY_MAX_ENTRY_CHARS, 1, 1)
    _age_workspace(db_target, ws)
    # the new entry is the oldest by created_at and alone as big as an entry may be
    assert db.memory_put(ws, "big", "y" * 5000, 1, 2) == ["k0"]
    listed = keys(db.memory_list(ws))
    assert listed[0] == "big"
    assert "k0" not in listed and len(listed) == 8
    big = db.memory_get(ws, "big")
    assert big is not None and len(big.value) == MEMORY_MAX_ENTRY_CHARS

    for i in range(MEMORY_MAX_ENTRIES):
        db.memory_put(f"{ws}/count", f"k{i:02}", "v", 1, 1)
    _age_workspace(db_target, f"{ws}/count")
    assert db.memory_put(f"{ws}/count", "new", "v", 1, 2) == ["k00"]
    assert db.memory_get(f"{ws}/count", "new") is not None


def test_memory_returns_every_evicted_key_oldest_first(db: Store, ws: str) -> None:
    for i in range(20):  # 20 x 800 = 16,000
        db.memory_put(ws, f"k{i:02}", "x" * 800, 1, 1)
    db.memory_put(f"{ws}/2", "keep", "x" * 2000, 1, 1)
    second = db.memory_list(f"{ws}/2")
    # +2,000 = 18,000: three 800-char entries must go to get back under 16,000
    assert db.memory_put(ws, "big", "y" * 2000, 1, 2) == ["k00", "k01", "k02"]
    entries = db.memory_list(ws)
    assert len(entries) == 18
    assert sum(len(e.value) for e in entries) == 17 * 800 + 2000
    assert db.memory_list(f"{ws}/2") == second, "other workspaces are untouched"


def test_memory_delete_and_clear_stay_in_their_workspace(db: Store, ws: str) -> None:
    db.memory_put(f"{ws}/a", "k", "v", 1, 1)
    db.memory_put(f"{ws}/a", "k2", "v", 1, 1)
    db.memory_put(f"{ws}/b", "k", "v", 1, 1)
    assert db.memory_delete(f"{ws}/a", "k") is True
    assert db.memory_delete(f"{ws}/a", "k") is False
    assert db.memory_get(f"{ws}/b", "k") is not None
    assert db.memory_clear(f"{ws}/a") == 1
    assert db.memory_clear(f"{ws}/a") == 0
    assert keys(db.memory_list(f"{ws}/b")) == ["k"]
    assert db.memory_list(f"{ws}/a") == []


BIG_WORKSPACE = 70_000
"""Entries past PostgreSQL's 65,535 parameters a statement, plus room for the caps' 64: a
workspace a centre reaches when `sync` merges memory without the per-workspace caps."""


def _fill_workspace(target: str, workspace: str, entries: int) -> None:
    """`entries` facts `k0`, `k1`, … in `workspace`, written in one statement as a merge
    leaves them (one stamp, so eviction takes them in the order written)."""
    raw(
        target,
        "INSERT INTO memory (workspace, key, value, run_id, step, created_at, kind, pinned) "
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "SELECT ?, 'k' || CAST(i AS TEXT), 'v', 1, 1, '2020-01-01T00:00:00.000Z', 'fact', 0 "
        "FROM n",
        entries - 1,
        workspace,
    )


@pytest.mark.slow_on("sqlite")
def test_a_workspace_past_the_drivers_parameter_limit_is_written_again_and_again(
    store: Store, store_target: str
) -> None:
    run = store.start_run("g", "f")
    store.memory_put(WS, "pinned", "kept", run, 1)
    store.memory_pin(WS, "pinned", True)
    _fill_workspace(store_target, WS, BIG_WORKSPACE)
    evicted = store.memory_put(WS, "new", "v", run, 2)
    # the pin and the new entry count towards the 64; every other entry but the newest 62 goes
    gone = BIG_WORKSPACE - (MEMORY_MAX_ENTRIES - 2)
    assert evicted == [f"k{i}" for i in range(gone)]
    listed = keys(store.memory_list(WS))
    assert len(listed) == MEMORY_MAX_ENTRIES
    assert {"pinned", "new", f"k{gone}", f"k{BIG_WORKSPACE - 1}"} <= set(listed)
    assert store.memory_put(WS, "again", "v", run, 3) == [f"k{gone}"]
    assert store.memory_get(WS, "again") is not None
