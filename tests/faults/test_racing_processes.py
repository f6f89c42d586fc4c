"""Real processes racing on the 0.66 API, on both backends: memory caps under concurrent
writers (with recalls shaping the order), a compare-and-set session head that lets exactly one
writer move it from a given head, and a queue that hands each entry to exactly one consumer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness_store import Store

WORKERS = Path(__file__).resolve().parents[1] / "workers"
WORKER = WORKERS / "api2_worker.py"


def race(target: str, *argvs: list[str]) -> list[list[object]]:
    """Start one worker per argv, release them together, return each one's JSON lines."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), argv[0], target, *argv[1:]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    out: list[list[object]] = []
    for proc in procs:
        stdout, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        out.append([json.loads(line) for line in stdout.splitlines()])
    return out


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
