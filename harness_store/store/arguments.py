"""Every public Store method checks its arguments against its own signature, before it reads
or writes anything.

A Python caller can pass anything: an id of 2⁶⁴ (which SQLite's driver refuses with a raw
`OverflowError`, PostgreSQL's with its own error), `None` where a run id belongs, one string
where a list of keys is expected (which would be stored as one key per character), a record of
the wrong class. The annotations already say what each parameter takes, so the checks are
derived from them once, when the `Store` class is made, rather than written again in every
method: an argument that does not fit raises `InvalidValueError` naming the method, the
parameter and what it takes, and nothing is written. Integers must fit a signed 64-bit integer
(what both backends store) unless annotated `WrappedU64`.
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import os
import reprlib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, get_args, get_origin

from ..errors import InvalidValueError
from ..formats import I64_MAX, I64_MIN, U64_MAX, is_number

T = TypeVar("T")

Check = Callable[[object], bool]
"""Whether a value fits a parameter."""


@dataclass(frozen=True)
class _Wrapped:
    """Marks an integer parameter that takes any `u64`, stored with upstream's wrapping cast."""


WrappedU64 = Annotated[int, _Wrapped()]
"""An `int` parameter that takes 0 … 2⁶⁴ − 1 (upstream's `u64` written `as i64`)."""

_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 40
_SHOWN.maxlist = 4


@dataclass(frozen=True)
class _Rule:
    check: Check
    takes: str
    """What the parameter takes, said to the caller."""


def _integer(value: object) -> bool:
    return type(value) is int and I64_MIN <= value <= I64_MAX


def _wrapped_integer(value: object) -> bool:
    return type(value) is int and 0 <= value <= U64_MAX


def _instance(kind: type) -> Check:
    return lambda value: isinstance(value, kind)


def _rule(hint: Any) -> _Rule | None:
    """The rule for one annotation, or None when it says nothing worth checking (`Any`)."""
    origin = get_origin(hint)
    if origin is Annotated:
        base, *marks = get_args(hint)
        if base is int and any(isinstance(mark, _Wrapped) for mark in marks):
            return _Rule(_wrapped_integer, "an integer from 0 to 2⁶⁴ − 1")
        return _rule(base)
    if hint is Any or hint is object:
        return None
    if hint is int:
        return _Rule(_integer, "an integer from -2⁶³ to 2⁶³ − 1")
    if hint is bool:
        return _Rule(_instance(bool), "True or False")
    if hint is float:
        return _Rule(is_number, "a number")
    if hint is str:
        return _Rule(_instance(str), "a string")
    if hint is type(None):
        return _Rule(lambda value: value is None, "None")
    if origin is typing.Union or origin is types.UnionType:
        members = [_rule(member) for member in get_args(hint)]
        if any(member is None for member in members):
            return None
        rules = [member for member in members if member is not None]
        return _Rule(
            lambda value: any(rule.check(value) for rule in rules),
            " or ".join(rule.takes for rule in rules),
        )
    if origin in (list, abc.Sequence, abc.Iterable, abc.Collection):
        (item_hint,) = get_args(hint) or (Any,)
        return _sequence(_rule(item_hint), lazy=origin is abc.Iterable)
    if origin is tuple:
        parts = get_args(hint)
        if len(parts) == 2 and parts[1] is Ellipsis:  # tuple[X, ...]
            return _sequence(_rule(parts[0]), lazy=False)
        return _tuple([_rule(part) for part in parts])
    if origin in (dict, abc.Mapping):
        return _Rule(_instance(abc.Mapping), "a mapping")
    if origin is os.PathLike or hint is os.PathLike:
        return _Rule(_instance(os.PathLike), "a path")
    if isinstance(hint, type):
        return _Rule(_instance(hint), f"a {hint.__name__}")
    return None


def _sequence(item: _Rule | None, *, lazy: bool) -> _Rule:
    """A list of items: never a string (whose characters would each be taken as an item), each
    item checked. An iterable that is not a sequence (a generator) is checked as it is read."""

    def check(value: object) -> bool:
        if isinstance(value, str | bytes | bytearray):
            return False
        if not isinstance(value, abc.Sequence | abc.Set):
            return lazy and isinstance(value, abc.Iterable)
        return item is None or all(item.check(element) for element in value)

    takes = "a list" if item is None else f"a list of items that are each {item.takes}"
    return _Rule(check, takes)


def _tuple(items: list[_Rule | None]) -> _Rule:
    def check(value: object) -> bool:
        return (
            isinstance(value, tuple | list)
            and len(value) == len(items)
            and all(rule is None or rule.check(v) for rule, v in zip(items, value, strict=True))
        )

    return _Rule(check, f"a pair of ({', '.join(r.takes if r else 'anything' for r in items)})")


def _parameter_hints(function: Callable[..., Any]) -> dict[str, Any]:
    """Each parameter's annotation, evaluated. One naming a type imported only for type
    checkers (an optional dependency's, such as pyarrow's) is left unchecked."""
    hints = {}
    for name, annotation in function.__annotations__.items():
        if name == "return":
            continue
        try:
            hints[name] = (
                eval(annotation, function.__globals__)
                if isinstance(annotation, str)
                else annotation
            )
        except NameError:
            continue
    return hints


def _checking(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`function` with its arguments checked first; itself when it has nothing to check."""
    hints = _parameter_hints(function)
    parameters = list(inspect.signature(function).parameters.values())[1:]  # self / cls
    checks: list[tuple[int | None, str, _Rule]] = []
    for index, parameter in enumerate(parameters):
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        rule = _rule(hints.get(parameter.name, Any))
        if rule is None:
            continue
        positional = parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        checks.append((index if positional else None, parameter.name, rule))
    if not checks:
        return function

    every_positional: tuple[tuple[int, Check], ...] = tuple(
        (index, rule.check) for index, _, rule in checks if index is not None
    )
    needed = max((index for index, _ in every_positional), default=-1) + 1
    if len(every_positional) < len(checks):
        needed = -1  # a keyword-only parameter is checked too: always the full path

    def refuse(parameter: str, rule: _Rule, value: object) -> InvalidValueError:
        return InvalidValueError(
            f"{name}: {parameter} must be {rule.takes}, not {_SHOWN.repr(value)} "
            "(nothing was written)"
        )

    def call(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not kwargs and len(args) == needed:  # the common call: every checked value given
            for position, check in every_positional:
                if not check(args[position]):
                    break
            else:
                return function(self, *args)
        for index, parameter, rule in checks:
            if index is not None and index < len(args):
                value = args[index]
            elif parameter in kwargs:
                value = kwargs[parameter]
            else:
                continue  # its default
            if not rule.check(value):
                raise refuse(parameter, rule, value)
        return function(self, *args, **kwargs)

    return _located(call, function)


_ONE_LINE = compile(
    "def make(call):\n"
    "    def checked(self, *args, **kwargs): return call(self, args, kwargs)\n"
    "    return checked\n",
    __file__,
    "exec",
)
"""A wrapper whose whole body is on its `def` line, so that placed at a method's own `def`
(`_located`) each of its frames names that line."""

_TEMPLATE: dict[str, Any] = {}
exec(_ONE_LINE, _TEMPLATE)  # a constant template, compiled once
_MAKE: Callable[[Callable[..., Any]], Any] = _TEMPLATE["make"]


def _located(call: Callable[..., Any], function: Callable[..., Any]) -> Callable[..., Any]:
    """A wrapper of `function` calling `call(self, args, kwargs)`, found where `function` is:
    its code names `function`'s file, `def` line and name, so `inspect.getsourcefile`, a
    debugger and a traceback point at the concern's module, not at this one."""
    checked = _MAKE(call)
    own = function.__code__
    checked.__code__ = checked.__code__.replace(
        co_filename=own.co_filename,
        co_firstlineno=own.co_firstlineno,
        co_name=own.co_name,
        co_qualname=own.co_qualname,
    )
    return functools.wraps(function)(checked)


def checked_arguments(cls: type[T]) -> type[T]:
    """Make every public method of `cls` (its own and its mixins') check its arguments."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, classmethod):
            setattr(cls, name, classmethod(_checking(static.__func__, name)))
        elif inspect.isfunction(static):
            setattr(cls, name, _checking(static, name))
    return cls
