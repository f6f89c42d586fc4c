"""A Store used on both sides of `fork()` (multiprocessing's default on Linux): the child gets
fresh connections, the parent's are untouched, and no step is lost on either side."""

from __future__ import annotations

import os
import traceback

from harness_store import StepRecord, Store

CHILDREN, STEPS = 3, 60


def child_writes(store: Store, index: int) -> int:
    """In a forked child: a run of its own, STEPS checkpoints; exit status 0 when all went in."""
    try:
        run = store.start_run(f"child {index}", "out.txt")
        for n in range(1, STEPS + 1):
            store.checkpoint_step(run, StepRecord.new(n, f"c{index}", "ok"))
        with store.transaction():
            store.record(run, StepRecord.new(STEPS + 1, "in a transaction", "ok"))
        store.close()
        return 0
    except BaseException:
        traceback.print_exc()
        return 1


def test_forked_writers_and_their_parent_lose_nothing(store_target: str) -> None:
    with Store.open(store_target) as store:
        parent_run = store.start_run("parent", "out.txt")
        store.checkpoint_step(parent_run, StepRecord.new(1, "before fork", "ok"))
        pids = []
        for index in range(CHILDREN):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                os._exit(child_writes(store, index))
            pids.append(pid)
        for n in range(2, STEPS + 1):
            store.checkpoint_step(parent_run, StepRecord.new(n, "parent", "ok"))
        statuses = [os.waitpid(pid, 0)[1] for pid in pids]
        assert [os.waitstatus_to_exitcode(s) for s in statuses] == [0] * CHILDREN
        store.checkpoint_step(parent_run, StepRecord.new(STEPS + 1, "after", "ok"))
        assert [s.step for s in store.steps(parent_run)] == list(range(1, STEPS + 2))
        children = [r for r in store.runs() if r != parent_run]
        assert len(children) == CHILDREN
        for run in children:
            assert [s.step for s in store.steps(run)] == list(range(1, STEPS + 2))
