"""Counting the statements SQLAlchemy compiles: what a test of "compiled once" asserts on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy.sql.compiler import Compiled


@contextmanager
def compilations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement SQLAlchemy compiles in the block (any dialect, any compiler), by the
    statement's class name."""
    compiled: list[str] = []
    original = Compiled.__init__

    def counting(self: Any, dialect: Any, statement: Any, *args: Any, **kwargs: Any) -> None:
        compiled.append(type(statement).__name__)
        original(self, dialect, statement, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(Compiled, "__init__", counting)
        yield compiled
