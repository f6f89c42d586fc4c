"""The package's layers read one way: no module imports a layer above it.

The order is written once, in `LAYERS`, lowest first; a module belongs to the layer of the
longest prefix naming it. A module may import its own layer and those below (sideways
imports between the packages of one layer are named in `SIDEWAYS` when they are not allowed).
Every import counts — at the top, inside a function (imported on first use) or for typing
only — since each is a dependency a reader must hold in their head.

`KNOWN` lists the imports that break the order today, each with why it is still there; an
entry whose import is gone fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "harness_store"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # facts and values, importing nothing of the package's but each other
    # (`sync.report`: what a sync did, a value `SyncRefusedError` carries; `releases`: the
    # upstream releases as facts, which the models, the schema and the commands read)
    (
        "values",
        (
            "errors",
            "formats",
            "policy",
            "sqltypes",
            "sqldefaults",
            "stamps",
            "file_modes",
            "lazy",
            "records",
            "sync.report",
            "releases",
        ),
    ),
    # the tables, as upstream's releases shape them, and how each links to a run
    # (`sync.rules`: facts about the tables, which sync and the Arrow shapes both read)
    ("models", ("models", "sync.rules")),
    # the tables as Arrow: shapes, statements, record batches
    ("arrow", ("arrow",)),
    # what differs by backend, and a store's address
    ("backends", ("dialects", "targets", "engine")),
    # the one holder of connections, and the compiled statements of the hot paths, which the
    # upgrade goes through too
    ("connector", ("connector",)),
    # a store's schema lifecycle: detection, the chain, upgrades
    ("schema", ("schema", "migrations")),
    # the Store and its concerns
    ("store", ("store",)),
    # what is built on the Store's public operations
    ("services", ("aio", "analytics", "sync", "transfer", "otel")),
    # the command, and the package's face (`harness_store` re-exports the rest)
    ("face", ("cli", "")),
)
"""The layers, lowest first: (name, module prefixes under `harness_store`)."""

SIDEWAYS: frozenset[tuple[str, str]] = frozenset(
    {
        ("analytics", "sync"),  # an analysis reads a store; it does not depend on syncing
    }
)
"""Packages of one layer that may not import each other: (importer, imported)."""

KNOWN: dict[tuple[str, str], str] = {}
"""Imports against the order still in the package: (module, imported) -> why."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> Iterator[str]:
    """The harness_store modules (or packages) `path` imports, anywhere in it."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "harness_store")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "harness_store":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield sub if is_module(sub) else target


def is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").exists() or (PACKAGE / relative).is_dir()


def layer_of(module: str) -> tuple[int, str]:
    """(the layer's index, the prefix that placed it) of a harness_store module."""
    inner = module.removeprefix("harness_store").removeprefix(".")
    best: tuple[int, str] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            fits = prefix == "" or inner == prefix or inner.startswith(prefix + ".")
            if fits and (best is None or len(prefix) > len(best[1])):
                best = (index, prefix)
    assert best is not None, module
    return best


def violations() -> dict[tuple[str, str], str]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        mine, my_prefix = layer_of(importer)
        for imported in set(imports(path)):
            theirs, their_prefix = layer_of(imported)
            if theirs > mine:
                found[(importer, imported)] = (
                    f"{LAYERS[mine][0]} imports {LAYERS[theirs][0]}, a layer above it"
                )
            elif (my_prefix, their_prefix) in SIDEWAYS:
                found[(importer, imported)] = f"{my_prefix} imports {their_prefix} sideways"
    return found


def test_every_module_has_a_layer() -> None:
    for path in PACKAGE.rglob("*.py"):
        layer_of(module_name(path))


def test_no_module_imports_a_layer_above_it() -> None:
    found = violations()
    new = {k: v for k, v in found.items() if k not in KNOWN}
    assert new == {}, "move the code to its layer, or the layer table if it is wrong"


def test_known_exceptions_are_still_needed() -> None:
    gone = set(KNOWN) - set(violations())
    assert gone == set(), "these imports are gone: remove them from KNOWN"


def store_privates() -> set[str]:
    """The private names the Store's classes define (methods, properties, attributes set in
    them)."""
    from harness_store import Store

    names = {n for cls in Store.__mro__ for n in vars(cls) if n.startswith("_")}
    for path in (PACKAGE / "store").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and isinstance(node.ctx, ast.Store)
            ):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def reach_ins() -> set[str]:
    """`module: name` for each use of a Store private outside the Store's package, on
    anything but `self` (an object's own private of the same name is its own)."""
    privates = store_privates()
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "store") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or node.attr not in privates:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.add(f"{module_name(path)}: {node.attr}")
    return found


KNOWN_REACH_INS: dict[str, str] = {}
"""Uses of a Store private from outside `harness_store/store` still there -> why."""


def test_nothing_above_the_store_reaches_for_its_privates() -> None:
    """Code above the Store uses its public methods and the operations `store` documents
    for it (`read_snapshot`, `whole_snapshot`, `store.arrow`'s, `store.base`'s)."""
    assert reach_ins() - set(KNOWN_REACH_INS) == set()
    assert set(KNOWN_REACH_INS) - reach_ins() == set(), "gone: remove from KNOWN_REACH_INS"
