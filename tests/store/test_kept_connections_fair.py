"""Threads sharing one Store on PostgreSQL are served in turn: a thread that gives a kept
connection back does not take it again ahead of a thread already waiting for one."""

from __future__ import annotations

import threading

from harness_store import StepRecord, Store

THREADS = 8
CALLS = 8 * 150
"""Calls made by all threads together; each thread stops when they are all made."""
FAIR = 0.25
"""The fewest calls of any thread, at least this share of the most (a starved thread makes
a handful out of hundreds)."""


def test_eight_threads_checkpointing_through_one_store_each_get_their_share(
    pg_url: str,
) -> None:
    with Store.open(pg_url) as store:
        runs = [store.start_run(f"agent {k}", "out.txt") for k in range(THREADS)]
        counts = [0] * THREADS
        made = [0]
        lock = threading.Lock()
        start = threading.Barrier(THREADS)
        errors: list[BaseException] = []

        def work(k: int) -> None:
            start.wait()
            try:
                while True:
                    with lock:
                        if made[0] >= CALLS:
                            return
                        made[0] += 1
                    counts[k] += 1
                    store.checkpoint_step(runs[k], StepRecord(counts[k], "act", "ok", "p", "t", 1))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert not errors, errors
        assert sum(counts) == CALLS
        assert min(counts) >= FAIR * max(counts), counts
        for k, run in enumerate(runs):
            assert [s.step for s in store.steps(run)] == list(range(1, counts[k] + 1))
