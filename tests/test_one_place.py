"""Facts about SQLite's files and errors are spelled in one place each: the side files' suffixes
(`-wal`, `-shm`, `-journal`, `-writers`) in `dialects/still.py` and `dialects/sqlite_queue.py`,
and a driver error's result code (`sqlite_errorcode`) read only in `dialects/sqlite_codes.py`.
Everything else builds on those names, so a side file or a code is never known two ways."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "harness_store"

SUFFIXES = frozenset({"-wal", "-shm", "-journal", "-writers"})

SUFFIX_HOMES = frozenset({"dialects/still.py", "dialects/sqlite_queue.py"})

CODE_HOME = "dialects/sqlite_codes.py"

KNOWN: dict[str, str] = {}
"""Modules that still spell a suffix themselves: module -> why."""


@cache
def spellings() -> dict[str, set[str]]:
    """Every whole string and every name of an attribute read in the package: the modules
    (relative to the package) where it stands. The package is parsed once for all checks."""
    where: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                where.setdefault(node.value, set()).add(module)
            elif isinstance(node, ast.Attribute):
                where.setdefault(node.attr, set()).add(module)
    return where


def places(found: str) -> set[str]:
    """The modules (relative to the package) where `found` stands as a whole string, or
    as the name of an attribute read."""
    return set(spellings().get(found, ()))


def test_the_side_files_suffixes_are_spelled_in_one_place() -> None:
    spelled = {module for suffix in SUFFIXES for module in places(suffix)}
    assert spelled - SUFFIX_HOMES == set(KNOWN)


def test_result_codes_are_read_in_one_place() -> None:
    assert places("sqlite_errorcode") == {CODE_HOME}
