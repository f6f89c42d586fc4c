"""Driver errors become ours in one place, as httpx maps its transport errors in one.

The rule, read from the package's syntax trees:

- Outside the boundary — the translation (`connector/translation.py`) and the backends
  (`dialects/`, the driver's own layer: each backend's table of codes and the work done on a
  driver connection before any connector holds it) — no module reads a driver error: none of
  its internals (`orig`, `sqlstate`, `pgcode`, `diag`, `sqlite_errorcode`, …, as attributes
  or by name), none of the driver's error classes (`DBAPIError`, `OperationalError`,
  `IntegrityError`, `sqlite3.Error`, …, or the type's name compared as text), no call of a
  backend's table (`translate_error`) or of a code reader (`error_code`, `primary_code`),
  no error told by its module's name (`….startswith("psycopg")`). Callers branch on the typed
  errors of `harness_store.errors` and on what the translation says of them.
- Inside the backends, a PostgreSQL SQLSTATE is read in one function,
  `dialects/postgresql_codes.py`'s `sqlstate_of`, as a SQLite result code is read only in
  `dialects/sqlite_codes.py` (`tests/test_one_place.py`).

`KNOWN` lists the sites that break the rule today, each with why it is still there; an entry
whose site is gone fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "harness_store"

BOUNDARY_MODULES = frozenset({"connector/translation.py"})
BOUNDARY_PACKAGES = ("dialects/",)

INTERNALS = frozenset(
    {
        "orig",
        "sqlstate",
        "pgcode",
        "pgerror",
        "diag",
        "sqlite_errorcode",
        "sqlite_errorname",
        "connection_invalidated",
        "loaded_dbapi",
    }
)
"""A driver error's insides (and SQLAlchemy's wrapping of it), as attributes or names."""

DRIVER_ERRORS = frozenset(
    {
        "DBAPIError",
        "OperationalError",
        "IntegrityError",
        "ProgrammingError",
        "InterfaceError",
        "DatabaseError",
        "DataError",
        "InternalError",
        "NotSupportedError",
    }
)
"""The DB-API's error classes (SQLAlchemy's wrappers of them have the same names)."""

READERS = frozenset({"translate_error", "error_code", "primary_code"})
"""A backend's table of codes and the readers of a code: the translation's own pieces."""

SQLSTATE_HOME = ("dialects/postgresql_codes.py", "sqlstate_of")

KNOWN: dict[tuple[str, str], str] = {}
"""Sites outside the boundary still reading a driver error: (module, what) -> why."""


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith("migrations/"):
            continue
        yield module, ast.parse(path.read_text(encoding="utf-8"))


def _driver_reads(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(what, enclosing function) for each read of a driver error in `tree`."""

    def walk(node: ast.AST, function: str) -> Iterator[tuple[str, str]]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        found = _what(node)
        if found is not None:
            yield found, function
        for child in ast.iter_child_nodes(node):
            yield from walk(child, function)

    yield from walk(tree, "")


def _what(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        if node.attr in INTERNALS or node.attr in READERS:
            return node.attr
        if node.attr in DRIVER_ERRORS or (
            node.attr == "Error" and isinstance(node.value, ast.Name) and node.value.id == "sqlite3"
        ):
            return node.attr if node.attr != "Error" else "sqlite3.Error"
    if isinstance(node, ast.Name) and (
        node.id in DRIVER_ERRORS or node.id in READERS or node.id in INTERNALS
    ):
        return node.id
    if isinstance(node, ast.alias):
        name = node.name.rpartition(".")[2]
        if name in DRIVER_ERRORS or name in READERS or node.name == "sqlite_codes":
            return name
        if node.name.startswith("psycopg"):
            return node.name
    if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("sqlite_codes"):
        return "sqlite_codes"
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("psycopg"):
        return str(node.module)
    if isinstance(node, ast.Constant) and node.value in INTERNALS | DRIVER_ERRORS:
        return str(node.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "startswith"
        and any(
            isinstance(a, ast.Constant) and str(a.value).startswith("psycopg") for a in node.args
        )
    ):
        return 'startswith("psycopg")'
    return None


@cache
def sites() -> dict[tuple[str, str], set[str]]:
    """Every read of a driver error: (module, what) -> the functions it stands in."""
    found: dict[tuple[str, str], set[str]] = {}
    for module, tree in _modules():
        for what, function in _driver_reads(tree):
            found.setdefault((module, what), set()).add(function or "<module>")
    return found


def inside(module: str) -> bool:
    return module in BOUNDARY_MODULES or module.startswith(BOUNDARY_PACKAGES)


def test_no_module_outside_the_translation_reads_a_driver_error() -> None:
    outside = {key: sorted(fns) for key, fns in sites().items() if not inside(key[0])}
    assert set(outside) - set(KNOWN) == set(), outside
    assert set(KNOWN) - set(outside) == set(), "gone from the package: drop from KNOWN"


def test_a_sqlstate_is_read_by_the_backends_translation_only() -> None:
    read = {
        (module, function)
        for (module, what), functions in sites().items()
        if what == "sqlstate" and inside(module)
        for function in functions
    }
    assert read == {SQLSTATE_HOME}
