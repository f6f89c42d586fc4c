"""The durable event stream on both backends: `events_since` exclusive with one global cursor,
`tree_events_since` interleaving one tree (and seeking it on SQLite), and `follow` tailing what
another process writes, without spinning while idle, and on PostgreSQL outliving a session
terminated in the middle of a poll."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.pg_databases import terminate_inside_a_read
from support.processes import child_python

from harness_store import (
    RunEvent,
    Store,
)
from harness_store import models as m
from harness_store.errors import InvalidValueError

# --- the event stream ------------------------------------------------------------------------


def test_events_since_is_exclusive_and_the_cursor_is_global(store: Store) -> None:
    a, b = store.start_run("a", "x"), store.start_run("b", "x")
    assert store.event_cursor() == 0
    first = store.put_event(RunEvent.new(a, 1, "retry", kind="timeout", attempt=1, delay_ms=250))
    other = store.put_event(RunEvent.at_depth(b, 1, 1, "stalled"))
    last = store.put_event(RunEvent.new(a, 2, "stalled"))
    assert store.event_cursor() == last > other > first
    assert [c for c, _ in store.events_since(a, 0, 10)] == [first, last]
    assert store.events_since(a, first, 10) == [(last, RunEvent.new(a, 2, "stalled"))]
    assert store.events_since(a, 0, 1)[0][1].fields == {
        "kind": "timeout",
        "attempt": 1,
        "delay_ms": 250,
    }
    with store.engine.connect() as conn:
        raw = conn.execute(select(m.RunEvent.json).where(m.RunEvent.id == other)).scalar_one()
    assert raw == f'{{"run_id":{b},"step":1,"depth":1,"event":"stalled"}}'
    with pytest.raises(InvalidValueError):
        store.put_event(RunEvent.new(a, 1, "x", run_id=5))


def test_tree_events_since_interleaves_one_tree_and_skips_the_others(store: Store) -> None:
    root = store.start_run("fan out", "x")
    child = store.start_child_run("sub", "x", root, 1)
    grandchild = store.start_child_run("subsub", "x", child, 2)
    stranger = store.start_run("another tree", "x")
    written = [
        store.put_event(RunEvent.new(root, 1, "spawned", child_run_id=child, goal="sub")),
        store.put_event(RunEvent.new(stranger, 1, "stalled")),
        store.put_event(RunEvent.at_depth(grandchild, 1, 2, "stalled")),
        store.put_event(RunEvent.at_depth(child, 1, 1, "stalled")),
        store.put_event(RunEvent.new(root, 2, "stalled")),
    ]
    mine = [c for i, c in enumerate(written) if i != 1]
    tail = store.tree_events_since(root, 0, 100)
    assert [c for c, _ in tail] == mine
    assert [(e.run_id, e.depth) for _, e in tail] == [
        (root, 0),
        (grandchild, 2),
        (child, 1),
        (root, 0),
    ]
    assert tail[0][1].fields == {"child_run_id": child, "goal": "sub"}
    assert [c for c, _ in store.tree_events_since(root, mine[1], 100)] == mine[2:]
    assert [c for c, _ in store.tree_events_since(root, 0, 2)] == mine[:2]
    assert [c for c, _ in store.tree_events_since(child, 0, 100)] == [mine[1], mine[2]]
    assert store.tree_events_since(stranger + 100, 0, 100) == []
    with pytest.raises(InvalidValueError):
        store.tree_events_since(root, 0, -1)


def test_tree_events_since_seeks_its_trees_events_on_sqlite(tmp_path: Path) -> None:
    """Upstream forces the plan with `CROSS JOIN … INDEXED BY` so an observer polling one tree
    never reads every tree's events; ours must get the same plan."""
    with Store.open(tmp_path / "plan.sqlite3") as store:
        for _ in range(40):
            root = store.start_run("tree", "x")
            kid = store.start_child_run("kid", "x", root, 1)
            for step in range(40):
                store.put_event(RunEvent.new(root, step, "stalled"))
                store.put_event(RunEvent.at_depth(kid, step, 1, "stalled"))
        with store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
        with store.engine.connect() as conn:
            plan = explain_tree_events(conn, root)
    assert "run_events_run" in plan and "SCAN run_events" not in plan, plan


def explain_tree_events(conn: Any, root: int) -> str:
    from sqlalchemy.dialects import sqlite

    from harness_store.store.stream import tree_events_query

    statement = tree_events_query(root, 0, 100)
    sql = str(statement.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}").all()
    return " | ".join(str(r[3]) for r in rows)


WRITER = """
import sys, time
from harness_store import RunEvent, Store
with Store.open(sys.argv[1]) as st:
    run = int(sys.argv[2])
    for i in range(int(sys.argv[3])):
        st.put_event(RunEvent.new(run, i, "step", decision=f"d{i}", tool_call="", tokens=i,
                                  changed=True))
        time.sleep(0.02)
"""


@pytest.mark.slow_on("postgresql")
def test_follow_tails_events_another_process_writes_and_resumes(
    store: Store, store_target: str
) -> None:
    run = store.start_run("live", "x")
    store.put_event(RunEvent.new(run, 0, "started", goal="g", provider="p"))
    start = store.event_cursor()
    writer = child_python(WRITER, store_target, str(run), "20")
    seen: list[tuple[int, RunEvent]] = []
    began = time.monotonic()
    for cursor, event in store.follow(interval=0.05):  # from now: the backlog is skipped
        seen.append((cursor, event))
        if len(seen) == 10:
            break  # a reader stops whenever it likes; nothing is left open
    assert writer.wait(timeout=60) == 0, writer.stderr.read() if writer.stderr else ""
    assert time.monotonic() - began < 30
    assert [e.fields["decision"] for _, e in seen] == [f"d{i}" for i in range(10)]
    assert seen[0][0] > start
    # resumable: from the last cursor handled, exactly the rest, then the stream idles
    stop = threading.Event()
    rest = []
    for _cursor, event in store.follow(seen[-1][0], run_id=run, interval=0.05, stop=stop):
        rest.append(event.fields["decision"])
        if len(rest) == 10:
            stop.set()
    assert rest == [f"d{i}" for i in range(10, 20)]
    stop.set()
    assert list(store.follow(0, interval=0.05, stop=stop)) == []
    with pytest.raises(InvalidValueError):
        next(store.follow(0, interval=0))


def test_follow_does_not_spin_while_idle(store: Store) -> None:
    """While idle, each poll waits out the interval before the next: the gaps between polls
    are measured, and a loaded machine can only lengthen them. `follow` is stopped from its
    own third poll, so the test waits on an event rather than a timer."""
    interval = 0.1
    stop = threading.Event()
    polls: list[float] = []
    real = store.events_after

    def counting(*args: Any) -> Any:
        polls.append(time.monotonic())
        if len(polls) == 3:
            stop.set()
        return real(*args)

    store.events_after = counting  # type: ignore[method-assign]
    assert list(store.follow(interval=interval, stop=stop)) == []
    assert len(polls) == 3  # the stop set during a poll ends the loop without another
    gaps = [later - earlier for earlier, later in itertools.pairwise(polls)]
    assert all(gap >= interval / 2 for gap in gaps), gaps  # one poll per interval, no busy loop


@pytest.mark.parametrize("store_target", ["postgresql"], indirect=True)
def test_follow_outlives_a_session_terminated_mid_poll(store: Store, store_target: str) -> None:
    """A poll waiting on the server when its session is terminated (an administrator's
    `pg_terminate_backend`, a pooler's restart) is tried again on a new connection: the
    follow goes on and sees what is written after, through both APIs. The poll is held on a
    table lock so that the termination falls inside it."""
    run = store.start_run("live", "x")
    first = store.put_event(RunEvent.new(run, 0, "started", goal="g", provider="p"))
    seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def tail() -> None:
        try:
            for cursor, _event in store.follow(0, interval=0.05, stop=stop):
                seen.append(cursor)
        except BaseException as exc:
            errors.append(exc)

    follower = threading.Thread(target=tail)
    follower.start()
    try:
        wait_until(lambda: seen == [first] or bool(errors))
        terminate_inside_a_read(store_target, "run_events")
        with Store.open(store_target) as writer:
            second = writer.put_event(RunEvent.new(run, 1, "stalled"))
        wait_until(lambda: second in seen or bool(errors))
    finally:
        stop.set()
        follower.join(30)
    assert errors == []
    assert seen == [first, second]


def wait_until(done: Any, timeout: float = 30.0) -> None:
    """Poll `done()` every 20 ms until it is true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
