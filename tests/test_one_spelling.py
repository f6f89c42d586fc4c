"""One spelling of each statement and each list: the usage counters named once (`Usage`'s
fields, `records.accounting.USAGE_SUMS`), the checkpoint's INSERTs built once
(`store/checkpoints.py`), an integer parameter's bool-or-int check written once
(`formats.is_int`)."""

from __future__ import annotations

import ast
from pathlib import Path

from harness_store.records.accounting import USAGE_SUMS, Usage

PACKAGE = Path(__file__).resolve().parent.parent / "harness_store"

COUNTER_LISTS_KNOWN: dict[str, str] = {
    "releases.py": "each upstream release's columns as facts of that release, not the counters",
}
"""Modules that list the counters by hand: module -> why."""


def _modules() -> list[tuple[str, ast.AST]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations/versions" not in path.as_posix()
    ]


def _named(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def test_the_usage_counters_are_listed_once() -> None:
    """A tuple, list or set of three or more counter names (as text, or as a `Usage`'s
    attributes) is a second list of them: every reader takes `USAGE_SUMS` instead."""
    assert tuple(f.name for f in Usage.__dataclass_fields__.values()) == USAGE_SUMS
    counters = set(USAGE_SUMS)
    found = set()
    for module, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                names = {_named(e) for e in node.elts} & counters
                if len(names) >= 3:
                    found.add(module)
    assert found == set(COUNTER_LISTS_KNOWN)


CHECKPOINT_TABLES = {"Step": "steps", "CheckpointEvent": "checkpoint_events"}
"""The checkpoint's tables: model name -> table name."""

CHECKPOINT_HOME = "store/checkpoints.py"


def _inserted_into(node: ast.Call, assigned: dict[str, list[ast.expr]]) -> str | None:
    """The checkpoint table an `insert(x)` or `x.insert()` call writes, or None."""
    if isinstance(node.func, ast.Name) and node.func.id == "insert" and node.args:
        target = node.args[0]
    elif isinstance(node.func, ast.Attribute) and node.func.attr == "insert" and not node.args:
        target = node.func.value
    else:
        return None
    spelled = [target, *assigned.get(target.id, [])] if isinstance(target, ast.Name) else [target]
    for expr in spelled:
        for part in ast.walk(expr):
            if isinstance(part, ast.Attribute) and part.attr in CHECKPOINT_TABLES:
                return CHECKPOINT_TABLES[part.attr]
            if isinstance(part, ast.Constant) and part.value in CHECKPOINT_TABLES.values():
                return str(part.value)
    return None


Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _scopes(tree: ast.AST) -> list[Scope]:
    return [node for node in ast.walk(tree) if isinstance(node, Scope)]


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a scope, not those of the functions inside it (a name is resolved in its
    own function: `c` is one table in one method and another in the next)."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, Scope):
            todo.extend(ast.iter_child_nodes(node))
    return out


def test_the_checkpoint_inserts_are_built_once() -> None:
    """An INSERT into `steps` or `checkpoint_events` is built once, in the checkpoint path:
    `Store.record`, the checkpoint on the driver, the guarded checkpoint and a backend's batch
    form all run (or are made of) those two statements; no other module builds one."""
    found: list[tuple[str, str]] = []
    for module, tree in _modules():
        for scope in _scopes(tree):
            assigned: dict[str, list[ast.expr]] = {}
            nodes = list(_own_nodes(scope))
            for node in nodes:
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        names = target.elts if isinstance(target, ast.Tuple) else [target]
                        for name in names:
                            if isinstance(name, ast.Name):
                                assigned.setdefault(name.id, []).append(node.value)
            for node in nodes:
                if isinstance(node, ast.Call):
                    table = _inserted_into(node, assigned)
                    if table is not None:
                        found.append((module, table))
    assert sorted(found) == [(CHECKPOINT_HOME, "checkpoint_events"), (CHECKPOINT_HOME, "steps")]


def test_no_sql_text_inserts_into_the_checkpoint_tables() -> None:
    """No module writes the checkpoint's INSERTs as text (a backend's batch form takes its
    tables and columns from the two statements)."""
    found = set()
    for module, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = " ".join(node.value.split()).lower()
                if any(f"insert into {t}" in text for t in CHECKPOINT_TABLES.values()):
                    found.add(module)
    assert found == set()


INT_CHECK_HOME = "formats.py"
"""Where `is_int` and `is_number` are written: the one spelling of "an int, not a bool"."""


def _isinstance_of(node: ast.AST) -> set[str]:
    """The type names an `isinstance(x, …)` call (negated or not) asks about."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return set()
    if node.func.id != "isinstance" or len(node.args) != 2:
        return set()
    return {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}


def test_an_int_that_is_no_bool_is_checked_one_way() -> None:
    """An `isinstance(x, bool)` beside an `isinstance(x, int …)` in one condition is the
    check `formats.is_int` (or `is_number`) makes: every other module calls those. (A lone
    `isinstance(x, bool)`, converting a value rather than refusing it, is not that check.)"""
    found = set()
    for module, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.BoolOp):
                asked = [_isinstance_of(value) for value in node.values]
                if any("bool" in a for a in asked) and any("int" in a for a in asked):
                    found.add(module)
    assert found <= {INT_CHECK_HOME}
