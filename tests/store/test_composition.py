"""The Store is composed, not stacked by base-class order.

Its concerns (mixins) meet in `Store` without one overriding another, so the order of its
bases decides nothing; the checkpoint path (leases, staged turns, the checkpoint's statements)
is one collaborator the Store holds. A Store built with its bases reversed behaves the same on
that path: a leased run's checkpoint is checked, a staged turn is written with its step.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from harness_store import Store
from harness_store.errors import LeaseConflictError
from harness_store.records import AssistantTurn, StepRecord, ToolCall
from harness_store.store.base import StoreBase
from harness_store.store.checkpoints import Checkpoints

SHARED = {"__module__", "__doc__", "__dict__", "__weakref__", "__qualname__", "__annotations__"}


def own_names(cls: type) -> set[str]:
    """What `cls` defines itself (methods, properties, class attributes, annotations)."""
    names = set(vars(cls)) | set(vars(cls).get("__annotations__", {}))
    return {n for n in names if n not in SHARED and not n.startswith("__static_attributes")}


def concerns() -> list[type]:
    """Store's classes between it and `StoreBase`: its mixins and their shared bases."""
    return [c for c in Store.__mro__[1:] if issubclass(c, StoreBase) and c is not StoreBase]


def test_no_concern_overrides_or_shadows_another() -> None:
    seen: dict[str, str] = {}
    clashes = []
    for cls in concerns():
        for name in own_names(cls):
            if name in seen:
                clashes.append(f"{name}: {seen[name]} and {cls.__name__}")
            seen[name] = cls.__name__
    assert clashes == [], "a concern overrides another; compose instead (store/checkpoints.py)"


def test_no_concern_overrides_the_base() -> None:
    base = own_names(StoreBase) - {"__init__", "__enter__", "__exit__"}
    clashes = {f"{cls.__name__}.{n}" for cls in concerns() for n in own_names(cls) & base}
    assert clashes == set()


def test_store_initialises_no_concern_by_name() -> None:
    """`Store.__init__` builds the base; no concern needs an initialiser of its own."""
    assert [c.__name__ for c in concerns() if "__init__" in vars(c)] == []
    named = [n for n in dir(Store) if n.startswith(("_init_", "_compile_"))]
    assert named == [], "a concern's state belongs to a collaborator, or is built on first use"


def reversed_store() -> type[Store]:
    bases = tuple(reversed(Store.__bases__))
    body = {k: v for k, v in vars(Store).items() if k not in ("__dict__", "__weakref__")}
    cls = type("ReversedStore", bases, body)
    cls.__init__ = rebound(Store.__init__, cls)  # type: ignore[misc]  # its `super()`
    return cls


def rebound(function: Any, cls: type) -> Any:
    """`function` with its `super()` cell pointing at `cls`."""
    code = function.__code__
    cells = tuple(
        types.CellType(cls) if name == "__class__" else cell
        for name, cell in zip(code.co_freevars, function.__closure__, strict=True)
    )
    new = types.FunctionType(code, function.__globals__, function.__name__, None, cells)
    new.__kwdefaults__ = function.__kwdefaults__
    return new


def test_a_store_with_its_bases_reversed_checkpoints_the_same() -> None:
    cls = reversed_store()
    assert cls.__mro__[1:-1] != Store.__mro__[1:-1]
    with cls.memory() as first:
        assert isinstance(first._checkpoints, Checkpoints)
        run = first.start_run("g", "f")
        turn = AssistantTurn(1, "thinking", (ToolCall("read", {"path": "a"}),))
        first.stage_step_turn(run, turn)
        with first.acquire_lease(run, 60):
            first.checkpoint_step(run, StepRecord(1, "d", "r", "p", "t", 3))
        assert first.step_turns(run) == [turn]
        assert [s.step for s in first.steps(run)] == [1]
        assert first.run_lease(run) is None


def test_a_checkpoint_of_a_run_leased_away_writes_nothing_whatever_the_order(
    store_target: str,
) -> None:
    cls = reversed_store()
    with Store.open(store_target) as holder, cls.open(store_target) as other:
        run = holder.start_run("g", "f")
        mine = other.acquire_lease(run, 0)  # lapses at once
        holder.acquire_lease(run, 60)  # takes it over
        with pytest.raises(LeaseConflictError):
            other.checkpoint_step(run, StepRecord(1, "d", "r", "p", "t", 3))
        assert other.steps(run) == []
        assert mine.generation < holder.run_lease(run).generation  # type: ignore[union-attr]


def test_only_the_base_calls_the_connector() -> None:
    """The Store's concerns reach the database through the named ways of `store/base.py`,
    the one module that calls the connector (so renaming a connector operation is one edit)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "harness_store"
    callers = set()
    for path in package.rglob("*.py"):
        if "connector" in path.relative_to(package).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Attribute) and n.attr == "_connector" for n in ast.walk(tree)):
            callers.add(str(path.relative_to(package)))
    assert callers == {"store/base.py"}
