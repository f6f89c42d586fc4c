"""Facts about SQLite's files and errors are spelled in one place each: the side files' suffixes
(`-wal`, `-shm`, `-journal`, `-writers`) in `dialects/still.py` and `dialects/sqlite_queue.py`,
and a driver error's result code (`sqlite_errorcode`) read only in `dialects/sqlite_codes.py`.
Everything else builds on those names, so a side file or a code is never known two ways."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "harness_store"

SUFFIXES = frozenset({"-wal", "-shm", "-journal", "-writers"})

SUFFIX_HOMES = frozenset({"dialects/still.py", "dialects/sqlite_queue.py"})

CODE_HOME = "dialects/sqlite_codes.py"

KNOWN: dict[str, str] = {
    "sync/watch.py": "the watcher's file stamps; its module is being changed beside this one",
}
"""Modules that still spell a suffix themselves: module -> why."""


def places(found: str) -> set[str]:
    """The modules (relative to the package) where `found` stands as a whole string, or
    as the name of an attribute read."""
    where = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            literal = isinstance(node, ast.Constant) and node.value == found
            attribute = isinstance(node, ast.Attribute) and node.attr == found
            if literal or attribute:
                where.add(path.relative_to(PACKAGE).as_posix())
    return where


def test_the_side_files_suffixes_are_spelled_in_one_place() -> None:
    spelled = {module for suffix in SUFFIXES for module in places(suffix)}
    assert spelled - SUFFIX_HOMES == set(KNOWN)


def test_result_codes_are_read_in_one_place() -> None:
    assert places("sqlite_errorcode") == {CODE_HOME}
