"""Real processes racing on the 0.66 API, on both backends: memory caps under concurrent
writers (with recalls shaping the order; and the default caps on PostgreSQL, where READ COMMITTED
once let two puts each miss the other's row), a compare-and-set session head that lets exactly one
writer move it from a given head, and a queue that hands each entry to exactly one consumer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.processes import run_together, worker_argv

from harness_store import Store
from harness_store.formats import MEMORY_MAX_ENTRIES


def race(target: str, *argvs: list[str]) -> list[list[Any]]:
    """Start one `racing_state_worker.py` per argv, release them together, return each one's
    JSON lines."""
    outputs = run_together(
        [worker_argv("racing_state_worker.py", argv[0], target, *argv[1:]) for argv in argvs]
    )
    return [[json.loads(line) for line in out.splitlines()] for out in outputs]


@pytest.mark.slow_on("postgresql")
def test_concurrent_limited_memory_writes_keep_both_caps_and_evict_each_key_once(
    store_target: str,
) -> None:
    with Store.open(store_target) as store:
        run = store.start_run("memory", "out.txt")
    workers, count = 3, 60
    results = race(
        store_target, *[["memory", str(run), str(w), str(count)] for w in range(workers)]
    )
    evicted = [key for lines in results for keys in lines for key in keys]  # type: ignore[union-attr]
    with Store.open(store_target) as store:
        kept = store.memory_list("/ws/raced")
    assert len(kept) <= 8
    assert sum(len(e.value) for e in kept) <= 300
    assert all(len(e.value) <= 60 for e in kept)
    assert len(evicted) == len(set(evicted)), "a key was reported evicted by two writers"
    written = {f"w{w}-{i}" for w in range(workers) for i in range(count)}
    assert set(evicted) | {e.key for e in kept} == written
    assert set(evicted).isdisjoint(e.key for e in kept)


@pytest.mark.slow_on("postgresql")
def test_a_compare_and_set_head_moves_once_from_each_head_under_concurrent_writers(
    store_target: str,
) -> None:
    with Store.open(store_target) as store:
        session = store.create_session("/ws")
    workers, count = 3, 40
    results = race(
        store_target, *[["head", str(session), str(w), str(count)] for w in range(workers)]
    )
    moves = [tuple(m) for lines in results for m in lines if m is not None]  # type: ignore[arg-type]
    froms = [m[0] for m in moves]
    assert len(froms) == len(set(froms)), "two writers moved the head from the same turn"
    # The moves form one chain from no head to the final head.
    step = dict(moves)
    with Store.open(store_target) as store:
        head = store.session_head(session)
    at: object = None
    seen = 0
    while at in step:
        at = step[at]
        seen += 1
    assert at == head and seen == len(moves) >= 1


@pytest.mark.slow_on("postgresql")
def test_a_queued_child_is_dequeued_by_exactly_one_of_several_consumers(
    store_target: str,
) -> None:
    entries = 200
    with Store.open(store_target) as store:
        parent = store.start_run("parent", "f")
        for i in range(entries):
            assert store.enqueue_agent(parent, i, f"goal {i}", 1) is True
        assert store.enqueue_agent(parent, 0, "goal 0", 1) is False
    results = race(store_target, *[["dequeue", str(parent), str(entries)] for _ in range(4)])
    taken = [i for lines in results for i in lines]
    assert sorted(taken) == list(range(entries)), "an entry was taken twice or not at all"
    with Store.open(store_target) as store:
        assert store.queued_agents(parent) == []


def test_concurrent_memory_puts_keep_the_cap_and_evict_each_key_once(pg_url: str) -> None:
    """PostgreSQL's READ COMMITTED let two puts each miss the other's row (65 entries, one key
    reported twice). SQLite's writes hold the whole database, so it has no such race (its
    fairness under tight-loop writers is another matter, item 11)."""
    store_target = pg_url
    with Store.open(store_target) as store:
        run = store.start_run("memory", "out.txt")
    workers, count = 4, 120
    outputs = run_together(
        [worker_argv("memory_filler.py", store_target, run, w, count) for w in range(workers)]
    )
    evicted: list[str] = []
    for out in outputs:
        for line in out.splitlines():
            evicted += json.loads(line)
    with Store.open(store_target) as store:
        kept = [e.key for e in store.memory_list("/ws/shared")]
    put = {f"w{w}-{i}" for w in range(workers) for i in range(count)}
    assert len(kept) == MEMORY_MAX_ENTRIES
    assert len(evicted) == len(set(evicted)), "a key was reported evicted by two callers"
    assert set(evicted).isdisjoint(kept)
    assert set(evicted) | set(kept) == put
