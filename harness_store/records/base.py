"""What the records share: the descriptor behind named constructors that share a field's name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Constructor(Generic[T]):
    """A classmethod that shares its name with a field (`PolicyEvent.decision`).

    Read on the class it is the named constructor; read on an instance the field's value
    wins, because the instance's `__dict__` shadows a non-data descriptor.
    """

    def __init__(self, fn: Callable[..., T]) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance: object, owner: type[Any]) -> Callable[..., T]:
        return lambda *args, **kwargs: self.fn(owner, *args, **kwargs)
