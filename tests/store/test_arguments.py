"""Every public Store method refuses a wrong-typed or out-of-range argument with
`InvalidValueError` before it touches the database, the same on both backends."""

from __future__ import annotations

import hashlib
import inspect
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import MetaData, select

from harness_store import Store
from harness_store.errors import InvalidValueError
from harness_store.records import StepRecord

TOO_BIG = 2**63
"""One past the largest integer either backend stores (SQLite's driver overflows on it)."""


@pytest.fixture
def opened(store_target: str) -> Iterator[Store]:
    with Store.open(store_target) as store:
        yield store


def content_digest(store: Store) -> str:
    """A digest of every row of every table: unchanged means nothing was written."""
    digest = hashlib.sha256()
    metadata = MetaData()
    with store.engine.connect() as conn:
        metadata.reflect(conn)
        for table in sorted(metadata.tables.values(), key=lambda t: t.name):
            digest.update(table.name.encode())
            for row in conn.execute(select(table).order_by(*table.primary_key.columns or table.c)):
                digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def parameter_hints(function: Any) -> dict[str, Any]:
    """A method's parameter annotations, evaluated (its return annotation, and a parameter
    naming a type imported only for type checkers, are left out)."""
    hints = {}
    for name, annotation in inspect.unwrap(function).__annotations__.items():
        if name != "return":
            try:
                hints[name] = eval(annotation, inspect.unwrap(function).__globals__)
            except NameError:
                continue
    return hints


def placeholder(hint: Any, run_id: int) -> tuple[bool, Any]:
    """A value that fits `hint` (when one is easy to make): an existing run's id for ints."""
    hint = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
    simple: dict[Any, Any] = {int: run_id, str: "x", bool: False, float: 1.0}
    if hint in simple:
        return True, simple[hint]
    members = typing.get_args(hint)
    if type(None) in members:
        return True, None
    for member in members:
        if member in simple:
            return True, simple[member]
    return False, None


def integer_cases() -> list[tuple[str, int]]:
    """(method, index of an `int` parameter) for every public method whose parameters before
    that one can be filled with plain placeholders."""
    cases = []
    for name in sorted(dir(Store)):
        static = inspect.getattr_static(Store, name)
        if name.startswith("_") or not inspect.isfunction(static):
            continue
        hints = parameter_hints(static)
        parameters = list(inspect.signature(static).parameters.values())[1:]
        for index, parameter in enumerate(parameters):
            if parameter.kind is not parameter.POSITIONAL_OR_KEYWORD:
                break
            hint = hints.get(parameter.name)
            if hint is int:
                cases.append((name, index))
            if not placeholder(hint, 0)[0]:
                break
    return cases


INTEGER_CASES = integer_cases()


def test_there_are_integer_cases_for_most_methods() -> None:
    assert len({name for name, _ in INTEGER_CASES}) > 100


@pytest.mark.slow_on("postgresql")
def test_every_integer_parameter_refuses_2_to_the_63_and_writes_nothing(opened: Store) -> None:
    run = opened.start_run("goal", "file.py")
    before = content_digest(opened)
    failures = []
    for name, index in INTEGER_CASES:
        method = getattr(opened, name)
        hints = parameter_hints(inspect.getattr_static(Store, name))
        parameters = list(inspect.signature(method).parameters.values())
        required = [
            p for p in parameters if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD
        ]
        args = [
            placeholder(hints.get(p.name), run)[1]
            for p in parameters[: max(index + 1, len(required))]
        ]
        args[index] = TOO_BIG
        try:
            method(*args)
        except InvalidValueError as exc:
            if parameters[index].name not in str(exc):
                failures.append(f"{name}: error does not name {parameters[index].name}: {exc}")
        except Exception as exc:
            failures.append(f"{name}({parameters[index].name}): {type(exc).__name__}: {exc}")
        else:
            failures.append(f"{name}({parameters[index].name}): accepted {TOO_BIG}")
    assert failures == []
    assert content_digest(opened) == before


def test_a_string_is_not_a_list_of_keys(opened: Store) -> None:
    run = opened.start_run("goal", "file.py")
    with pytest.raises(InvalidValueError, match="keys"):
        opened.record_memory_recall(run, 1, "/ws", "build-command")  # type: ignore[arg-type]
    assert opened.memory_recalls(run) == []


def test_none_is_not_a_lease_generation_or_a_cursor(opened: Store) -> None:
    run = opened.start_run("goal", "file.py")
    with pytest.raises(InvalidValueError, match="generation"):
        opened.release_lease(run, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="cursor"):
        opened.events_after(None, 10)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="limit"):
        opened.events_after(0, "10")  # type: ignore[arg-type]


@pytest.mark.slow_on("postgresql")
def test_a_record_of_the_wrong_class_is_refused(opened: Store) -> None:
    run = opened.start_run("goal", "file.py")
    before = content_digest(opened)
    with pytest.raises(InvalidValueError, match="StepRecord"):
        opened.checkpoint_step(run, {"step": 1, "tokens": 5})  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="StepRecord"):
        opened.checkpoint_steps(run, ["not a step"])  # type: ignore[list-item]
    assert content_digest(opened) == before


def test_a_bool_is_not_an_id(opened: Store) -> None:
    opened.start_run("goal", "file.py")
    with pytest.raises(InvalidValueError, match="run_id"):
        opened.run_status(True)  # type: ignore[arg-type]


@pytest.mark.slow_on("postgresql")
def test_valid_arguments_still_work(opened: Store) -> None:
    """The checks refuse only what does not fit: the ordinary calls go through."""
    run = opened.start_run("goal", "file.py")
    opened.checkpoint_steps(run, iter([StepRecord(1, "decide", "ok", tokens=3)]))
    opened.record_memory_recall(run, 1, "/ws", ["build-command"])
    opened.record_memory_recall(run, 2, "/ws", ("a", "b"))
    assert [s.step for s in opened.steps(run)] == [1]
    assert len(opened.memory_recalls(run)) == 3


def test_each_checked_method_is_found_in_the_module_that_defines_it() -> None:
    """The checking wrapper is not where a method lives: `inspect.getsourcefile` (what an
    editor's "go to definition", a debugger and the reference read) names the concern's own
    module for every public method, and a frame of the wrapper names the method's `def` line."""
    wrong = []
    for name in sorted(dir(Store)):
        if name.startswith("_"):
            continue
        member = getattr(Store, name)
        if not callable(member) or not hasattr(member, "__wrapped__"):
            continue
        defined = inspect.getsourcefile(inspect.unwrap(member))
        if inspect.getsourcefile(member) != defined:
            wrong.append(f"{name}: {inspect.getsourcefile(member)}")
    assert wrong == []
    checked = Store.start_run
    code = checked.__code__
    assert code.co_firstlineno == inspect.unwrap(checked).__code__.co_firstlineno
    assert code.co_name == "start_run"


def test_a_refused_argument_s_traceback_names_the_method_s_module() -> None:
    import traceback

    with Store.memory() as store, pytest.raises(InvalidValueError) as refused:
        store.start_run(None, "f")  # type: ignore[arg-type]
    files = [frame.filename for frame in traceback.extract_tb(refused.tb)]
    assert any(f.endswith("store/runs.py") for f in files), files
