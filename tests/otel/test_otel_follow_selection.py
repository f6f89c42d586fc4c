"""`export otlp --follow` with a selection, on both backends, counted at a loopback receiver
that keeps every copy: `--run ID` ships only the tree under that run (its runs unfinished when
the follow starts, and the children it grows meanwhile), `--since` only the runs started or
finished at or after the stamp — the same selection as an export without `--follow`."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from collections.abc import Callable

from sqlalchemy import create_engine, update
from support.clirun import COMMAND as CLI
from support.processes import Worker

from harness_store import Store
from harness_store import models as m

from .sink import Sink
from .trees import write_run


def started(store: Store, goal: str, parent: int | None = None) -> int:
    """A run with a step, a provider call and a tool call, left running."""
    run = (
        store.start_run(goal, "/repo")
        if parent is None
        else store.start_child_run(goal, "/repo", parent, 1)
    )
    write_run(store, run, 1, "m")
    return run


def shipped(target: str, options: list[str], write: Callable[[Store], int]) -> Counter[int]:
    """Run `export otlp --follow` with `options`, let `write` change the store once its first
    export is out (returning the last run it expects shipped: the sentinel), and count the
    runs whose spans arrived."""
    sink = Sink.start()
    argv = [*CLI, "export", "otlp", target, "--endpoint", sink.url, "--follow", *options]
    follower = Worker(argv)
    try:
        follower.wait_line("sent", timeout=180)
        with Store.open(target) as store:
            sentinel = write(store)
        arrived = sink.wait_for(lambda: sentinel in sink.run_ids(), timeout=180)
        assert arrived, "the sentinel run never arrived"
    finally:
        follower.proc.send_signal(signal.SIGINT)
        try:
            code = follower.finish(timeout=60)
        except subprocess.TimeoutExpired:
            code = follower.kill()
        sink.stop()
    assert code == 0, follower.stderr
    assert set(sink.counts.values()) == {1}, "a span was sent twice"
    return sink.run_ids()


def test_follow_with_run_ships_only_that_runs_tree(store_target: str) -> None:
    with Store.open(store_target) as store:
        root = started(store, "the followed root")
        child = started(store, "its child, running", root)
        store.finish_run(root, "success")
        other = started(store, "another tree's root, running")
        other_child = started(store, "another tree's child", other)
        store.finish_run(other_child, "success")

    made: dict[str, int] = {}

    def write(store: Store) -> int:
        store.finish_run(child, "success")  # unfinished when the follow started
        store.finish_run(other, "success")  # likewise, but outside the tree
        made["grandchild"] = grandchild = started(store, "grown meanwhile", child)
        store.finish_run(grandchild, "success")
        newer = started(store, "a new tree")
        store.finish_run(newer, "success")
        stranger = started(store, "a new tree's child", newer)
        store.finish_run(stranger, "success")
        made["sentinel"] = sentinel = started(store, "the tree's last child", root)
        store.finish_run(sentinel, "success")
        return sentinel

    runs = shipped(store_target, ["--run", str(root)], write)
    assert set(runs) == {root, child, made["grandchild"], made["sentinel"]}, runs
    assert set(runs.values()) == {1}


def test_follow_with_since_ships_only_runs_started_or_finished_since(store_target: str) -> None:
    """`--since` a time ahead: a run started and finished before it is not shipped, whether it
    was running when the follow started or began after; a run stamped as started after it
    is (the sentinel, its start moved past the stamp)."""
    since = "2031-01-01"
    with Store.open(store_target) as store:
        early = started(store, "running when the follow starts")
        done = started(store, "finished before the follow")
        store.finish_run(done, "success")
    url = store_target if "://" in store_target else f"sqlite:///{store_target}"
    made: dict[str, int] = {}

    def write(store: Store) -> int:
        store.finish_run(early, "success")
        newer = started(store, "started and finished before --since")
        store.finish_run(newer, "success")
        made["sentinel"] = sentinel = started(store, "started after --since")
        engine = create_engine(url)
        try:
            with engine.begin() as conn:
                runs = m.table_of(m.Run)
                moved = update(runs).where(runs.c.id == sentinel)
                conn.execute(moved.values(started_at="2032-01-01T00:00:00.000Z"))
        finally:
            engine.dispose()
        store.finish_run(sentinel, "success")
        return sentinel

    runs = shipped(store_target, ["--since", since], write)
    assert set(runs) == {made["sentinel"]}, runs
