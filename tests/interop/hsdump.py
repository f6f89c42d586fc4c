"""What harness_store reads from a store, in the shape of the 0.13 oracle's `dump`.

The oracle's dump (glue/oracle.rs) is JSON of every public getter of upstream's Store for every
run and key; this builds the same document through `harness_store.Store`, so the two compare
with `==`. Like the oracle, plain SQL here only enumerates keys the API cannot list (spawn
keys, memory workspaces); every value comes from a Store method. An older release's dump has
fewer fields: `project` cuts harness_store's document down to the fields that dump has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import func, select

from harness_store import Store, models
from harness_store.errors import StoreError
from harness_store.records import RunStatus

T = TypeVar("T")


def _record(value: Any) -> Any:
    if value is None:
        return None
    out = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        out[f.name] = item.value if hasattr(item, "value") else item
    return out


def _call(fn: Callable[[], T], convert: Callable[[T], Any] = lambda x: x) -> Any:
    """A getter's value as the oracle renders it: the value, or `{"error": …}`."""
    try:
        return convert(fn())
    except StoreError as exc:
        return {"error": str(exc)}


def _records(fn: Callable[[], list[Any]]) -> Any:
    return _call(fn, lambda xs: [_record(x) for x in xs])


def _run_status(status: RunStatus | None) -> str | None:
    return None if status is None else status.name.capitalize()


def _summary(store: Store, run: int) -> Any:
    summary = store.run_summary(run)
    return _record(summary)


def harness_dump(store: Store, release: str = "0.13") -> dict[str, Any]:
    """Every value the 0.13 oracle's `dump` holds, read through harness_store."""
    run_ids = sorted(store.runs())
    runs = []
    for run in run_ids:
        check = _call(lambda run=run: store.check_resumable(run), lambda _: "ok")
        runs.append(
            {
                "id": run,
                "steps": _records(lambda run=run: store.steps(run)),
                "last_step": _call(lambda run=run: store.last_step(run)),
                "provider": _call(lambda run=run: store.provider(run)),
                "events": _records(lambda run=run: store.events(run)),
                "agent_events": _records(lambda run=run: store.agent_events(run)),
                "children": _call(lambda run=run: store.children(run)),
                "parent": _call(lambda run=run: store.parent(run)),
                "depth": _call(lambda run=run: store.depth(run)),
                "sandbox_events": _records(lambda run=run: store.sandbox_events(run)),
                "checkpoint_events": _records(lambda run=run: store.checkpoint_events(run)),
                "status": _call(lambda run=run: store.status(run)),
                "run_status": _call(lambda run=run: store.run_status(run), _run_status),
                "outcome": _call(lambda run=run: store.outcome(run)),
                "spent_tokens": _call(lambda run=run: store.spent_tokens(run)),
                "tree_run_ids": _call(lambda run=run: store.tree_run_ids(run)),
                "spent_tokens_tree": _call(lambda run=run: store.spent_tokens_tree(run)),
                "agent_count_tree": _call(lambda run=run: store.agent_count_tree(run)),
                "check_resumable": check,
                "elapsed_positive": _call(lambda run=run: store.elapsed_secs(run) > 0.0),
                "mcp_events": _records(lambda run=run: store.mcp_events(run)),
                "context_events": _records(lambda run=run: store.context_events(run)),
                "run_summary": _call(lambda run=run: _summary(store, run)),
                "canonical_trace": _call(lambda run=run: store.canonical_trace(run)),
                "run_policy": _call(lambda run=run: store.run_policy(run)),
                "observations": _records(lambda run=run: store.observations(run)),
            }
        )
    pending = [
        _record(p) for run in run_ids for p in store.pending_for_run(run)
    ]  # every request, as the oracle enumerates them
    pending.sort(key=lambda p: p["id"])
    spawns = []
    with store.engine.connect() as conn:
        s = models.Spawn
        keys = conn.execute(
            select(s.parent_run_id, s.step, s.goal)
            .group_by(s.parent_run_id, s.step, s.goal)
            .order_by(func.min(s.id))
        ).all()
        workspaces = conn.execute(
            select(models.Memory.workspace)
            .group_by(models.Memory.workspace)
            .order_by(models.Memory.workspace)
        ).scalars()
        workspaces = list(workspaces)
    for parent, step, goal in [*keys, (999_999, 1, "no such spawn")]:
        spawns.append(
            {
                "parent_run_id": parent,
                "step": step,
                "goal": goal,
                "found": _call(lambda p=parent, s=step, g=goal: _record(store.find_spawn(p, s, g))),
            }
        )
    memory = {}
    for ws in workspaces:
        entries = store.memory_list(ws)
        memory[ws] = {
            "list": [_record(e) for e in entries],
            "get": [_record(store.memory_get(ws, e.key)) for e in entries],
        }
    return {
        "release": release,
        "run_ids": run_ids,
        "runs": runs,
        "runs_api": store.runs(),
        "last_run": store.last_run(),
        "pending": pending,
        "spawns": spawns,
        "memory": memory,
        "memory_get_missing": _record(store.memory_get("/ws/one", "no such key")),
        "memory_list_empty": [_record(e) for e in store.memory_list("/ws/none")],
    }


def project(value: Any, like: Any) -> Any:
    """`value` cut down to the shape of `like`: the keys `like`'s dicts have (an older
    release's dump has fewer fields), element by element through lists."""
    if isinstance(like, dict) and isinstance(value, dict) and "error" not in like:
        return {k: project(value[k], like[k]) if k in value else value.get(k) for k in like}
    if isinstance(like, list) and isinstance(value, list) and len(like) == len(value):
        return [project(v, w) for v, w in zip(value, like, strict=True)]
    return value


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two dumps differ, as readable paths (an assertion message worth reading)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for k in sorted(set(ours) | set(theirs), key=str):
            if k not in ours or k not in theirs:
                out.append(f"{path}.{k}: only in {'oracle' if k in theirs else 'harness_store'}")
            else:
                out += differences(ours[k], theirs[k], f"{path}.{k}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]  # fmt: skip
    if ours != theirs or type(ours) is not type(theirs):
        return [f"{path}: harness_store {ours!r:.300} != oracle {theirs!r:.300}"]
    return []


def refusals(value: Any, path: str = "") -> list[str]:
    """Where a dump holds a getter's refusal (`{"error": …}`), with the message."""
    if isinstance(value, dict):
        if set(value) == {"error"}:
            return [f"{path}: {value['error']}"]
        return [r for k, v in value.items() for r in refusals(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [r for i, v in enumerate(value) for r in refusals(v, f"{path}[{i}]")]
    return []


def in_head_memory_order(dump: dict[str, Any]) -> dict[str, Any]:
    """A release's dump with each workspace's memory in the order the head lists it.

    Until 0.57 upstream broke `created_at` ties by row id; from 0.58 by key. harness_store at head
    follows 0.58+, so rows written in one millisecond (support.legacy writes them so) list in
    another order than an older release lists them; the rows themselves must still agree.
    """
    if "memory" not in dump:  # before 0.7 there is no memory
        return dump
    memory = {}
    for ws, views in dump["memory"].items():
        order = sorted(
            range(len(views["list"])),
            key=lambda i: (views["list"][i]["created_at"], views["list"][i]["key"]),
        )
        memory[ws] = {name: [entries[i] for i in order] for name, entries in views.items()}
    return {**dump, "memory": memory}
