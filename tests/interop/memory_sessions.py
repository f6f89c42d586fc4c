"""The second half of io-harness 0.66's Store API as the 0.66 oracle's `dump` renders it: our
records put in the form `rustdebug.parse` reads upstream's Debug output into, and the getters
read the way the oracle's dump reads them (per run, per session, per workspace)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from enum import Enum
from typing import Any

from harness_store import MemoryEntry, PlanVerdict, Store

from .rustdebug import parse

PER_RUN = (
    "memory_recalls",
    "memory_snapshots",
    "summaries",
    "todos",
    "questions",
    "plans",
    "approved_plan",
    "unresolved_approvals",
    "messages_for",
    "queued_agents",
    "tree_addresses",
    "process_handles",
    "handle_outputs",
    "turn_for_run",
)
"""The per-run fields of the dump this half of the API reads."""


def py(value: Any) -> Any:
    """A harness_store value in the form `rustdebug.parse` gives upstream's (`Some(x)` is x,
    a struct a dict with its `_type`, a unit variant its name)."""
    if isinstance(value, PlanVerdict):
        if value.kind == "revise":
            return {"_type": "Revise", "correction": value.correction}
        return value.kind.capitalize()
    if isinstance(value, Enum):
        return str(value.value).capitalize()
    if isinstance(value, MemoryEntry):
        out = {"_type": "MemoryEntry"}
        out.update({f.name: py(getattr(value, f.name)) for f in dataclasses.fields(value)})
        out["kind"] = value.kind.capitalize()
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Fields left out of a record's equality are harness_store's additions beside
        # upstream's struct (`Pruned.tables`, `Pruned.run_ids`): not in upstream's debug form.
        out = {"_type": type(value).__name__}
        out.update(
            {f.name: py(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}
        )
        return out
    if isinstance(value, list):
        return [py(v) for v in value]
    if isinstance(value, tuple):
        return tuple(py(v) for v in value)
    return value


def run_fields(store: Store, run: int) -> dict[str, Any]:
    """Our reads of one run, in the dump's shape."""
    handles = store.process_handles(run)
    return {
        "memory_recalls": py(store.memory_recalls(run)),
        "memory_snapshots": py(store.memory_snapshots(run)),
        "summaries": py(store.summaries(run)),
        "todos": py(store.todos(run)),
        "questions": py(store.questions(run)),
        "plans": py(store.plans(run)),
        "approved_plan": py(store.approved_plan(run)),
        "unresolved_approvals": py(store.unresolved_approvals(run)),
        "messages_for": py(store.messages_for(run)),
        "queued_agents": py(store.queued_agents(run)),
        "tree_addresses": py(store.tree_addresses(run)),
        "process_handles": py(handles),
        "handle_outputs": [store.handle_output(run, h.handle) for h in handles],
        "turn_for_run": store.turn_for_run(run),
    }


def their_run_fields(run: dict[str, Any]) -> dict[str, Any]:
    out = {key: parse(run[key]) for key in PER_RUN if key != "handle_outputs"}
    out["handle_outputs"] = [parse(s) for s in run["handle_outputs"]]
    return out


def session_fields(store: Store, session: int) -> dict[str, Any]:
    turns = store.session_turns(session)
    return {
        "root": store.session_root(session),
        "head": store.session_head(session),
        "turns": py(turns),
        "turn": [py(store.session_turn(t.id)) for t in turns],
        "size": py(store.session_size(session)),
    }


def their_session_fields(session: dict[str, Any]) -> dict[str, Any]:
    return {
        "root": parse(session["root"]),
        "head": parse(session["head"]),
        "turns": parse(session["turns"]),
        "turn": [parse(t) for t in session["turn"]],
        "size": parse(session["size"]),
    }


def differences(
    what: str, ours: dict[str, Any], theirs: dict[str, Any], keys: Iterable[str]
) -> list[str]:
    """Each of `keys` whose value differs between our read and upstream's, said as a line."""
    return [
        f"{what} {key}: ours {ours[key]!r} != theirs {theirs[key]!r}"
        for key in keys
        if ours[key] != theirs[key]
    ]


def compare(store: Store, dump: dict[str, Any]) -> list[str]:
    """Every field of this half of the API where our read of `store` and the dump differ."""
    problems: list[str] = []
    for run in dump["runs"]:
        theirs = their_run_fields(run)
        problems += differences(f"run {run['id']}", run_fields(store, run["id"]), theirs, PER_RUN)
    for session in dump["sessions"]:
        theirs = their_session_fields(session)
        ours = session_fields(store, session["id"])
        problems += differences(f"session {session['id']}", ours, theirs, list(theirs))
    for text in dump["question"]:
        theirs = parse(text)
        if py(store.question(theirs["id"])) != theirs:
            problems.append(f"question: ours {store.question(theirs['id'])!r} != theirs {text}")
    for text in dump["plan"]:
        theirs = parse(text)
        if py(store.plan(theirs["id"])) != theirs:
            problems.append(f"plan: ours {store.plan(theirs['id'])!r} != theirs {text}")
    for workspace, entries in dump["memory"].items():
        if py(store.memory_list(workspace)) != parse(entries["list"]):
            problems.append(f"memory {workspace}: {store.memory_list(workspace)!r}")
    return problems


def write_like_the_oracle(store: Store) -> list[tuple[str, Any]]:
    """The oracle script's calls on this half of the API, through harness_store, in its order
    (memory writes 3 ms apart, as the script sleeps); returns a transcript of what each call
    returned, in the dump's form, for the calls the oracle's transcript names."""
    import time

    from harness_store import (
        MemoryLimits,
        Plan,
        PlanStep,
        Question,
        TodoItem,
        TodoState,
    )
    from harness_store.errors import HeadConflictError

    t: list[tuple[str, Any]] = []
    root = store.start_run("goal: ünïcode 𝄞 \"quoted\" 'single'\nline two\ttab", "NOTES.md")
    child = store.start_child_run("child goal", "child.md", root, 1)
    store.record_spawn(root, 1, child, "child goal", "child.md", "needle", 5, "[]", "helper")
    t.append(("send_message", store.send_message(root, child, "root", 1, "do the thing")))
    t.append(("read_messages", py(store.read_messages(child, "root"))))
    store.send_message(child, root, "helper", 1, "unread reply")
    p1 = store.put_pending(root, 2, "exec", "rm -rf target", "why")
    store.put_pending(root, 2, "write", "x.txt", None)
    t.append(("resolve_pending", store.resolve_pending(p1, "approve")))
    q = store.put_question(root, 2, Question("Which db?", "two exist", ["sqlite", "pg"]))
    t.append(("answer_question", store.answer_question(q, "sqlite", "human")))
    store.put_question(root, 3, Question("unanswered?"))
    plan = store.put_plan(root, 2, Plan([PlanStep.new("read"), PlanStep.new("port").by("writer")]))
    t.append(("decide_plan", store.decide_plan(plan, PlanVerdict.approve(), "human")))
    plan2 = store.put_plan(root, 3, Plan([PlanStep.new("again")]))
    t.append(
        ("decide_plan revise", store.decide_plan(plan2, PlanVerdict.revise("smaller"), "gate"))
    )
    items = [TodoItem.new("one", TodoState.ACTIVE), TodoItem.new("two ✓", TodoState.DONE)]
    t.append(("write_todos", store.write_todos(root, items)))
    store.put_summary(root, 2, 2, "summary of two steps", 42)
    ws = "/ws/one"
    t.append(("memory_write fact", py(store.memory_write(ws, "lang", "rust ü", root, 1, "fact"))))
    time.sleep(0.003)
    t.append(
        ("memory_write decision", py(store.memory_write(ws, "db", "sqlite", root, 1, "decision")))
    )
    time.sleep(0.003)
    t.append(("memory_pin", store.memory_pin(ws, "lang", True)))
    small = MemoryLimits(max_entries=2, max_chars=40, max_entry_chars=12)
    for i, v in enumerate(["a" * 20, "𝄞" * 13, "third"]):
        wrote = store.memory_write_with("/ws/small", f"k{i}", v, root, 2, "fact", small)
        t.append((f"memory_write_with {i}", py(wrote)))
        time.sleep(0.003)
    t.append(("memory_put", store.memory_put(ws, "note", "overwritten", root, 2)))
    time.sleep(0.003)
    t.append(("memory_put again", store.memory_put(ws, "note", "the note", root, 3)))
    store.record_memory_recall(root, 3, ws, ["lang", "db"])
    t.append(("memory_forget", py(store.memory_forget(ws, "db", root, 3))))
    t.append(("memory_forget missing", py(store.memory_forget(ws, "nope", root, 3))))
    t.append(("memory_similar", py(store.memory_similar(ws, "language", "rust ü"))))
    s = store.create_session("/ws/one")
    run1 = store.start_run("turn one", "")
    t1 = store.record_turn(s, None, run1, "first prompt")
    store.finish_turn(t1, "first reply", "done")
    store.set_session_head(s, t1)
    run2 = store.start_run("turn two", "")
    t2 = store.record_turn(s, t1, run2, "second prompt")
    store.finish_turn(t2, None, "cancelled")
    try:
        store.set_session_head_if(s, None, t2)
        t.append(("set_session_head_if stale", None))
    except HeadConflictError:
        t.append(("set_session_head_if stale", "error"))
    store.set_session_head_if(s, t1, t2)
    s2 = store.create_session("/ws/two")
    run3 = store.start_run("doomed turn", "")
    t3 = store.record_turn(s2, None, run3, "gone")
    store.finish_turn(t3, "r", "done")
    t.append(("delete_session", py(store.delete_session(s2))))
    store.record_handle_started(root, 2, 7, "npm run dev")
    store.record_handle_pids(root, 7, [4242])
    store.record_handle_output(root, 2, 7, "listening on :3000\n")
    store.record_handle_ended(root, 7, "exited", 0, None)
    t.append(("enqueue_agent", store.enqueue_agent(root, 3, "queued goal", 1)))
    t.append(("enqueue_agent 2", store.enqueue_agent(root, 3, "dequeued goal", 1)))
    t.append(("dequeue_agent", store.dequeue_agent(root, 3, "dequeued goal")))
    store.finish_run(child, "passed")
    store.finish_run(root, "failed")
    store.finish_run(run1, "passed")
    return t
