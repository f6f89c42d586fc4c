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
import functools
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


@functools.cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's syntax tree, parsed once for all the tests of this file."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def imports(path: Path) -> Iterator[str]:
    """The harness_store modules (or packages) `path` imports, anywhere in it."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in nodes(path):
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


@functools.cache
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
        for node in nodes(path):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and isinstance(node.ctx, ast.Store)
            ):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


@functools.cache
def reach_ins() -> frozenset[str]:
    """`module: name` for each use of a Store private outside the Store's package, on
    anything but `self` (an object's own private of the same name is its own)."""
    privates = store_privates()
    found: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "store") in path.parents:
            continue
        for node in nodes(path):
            if not isinstance(node, ast.Attribute) or node.attr not in privates:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.add(f"{module_name(path)}: {node.attr}")
    return frozenset(found)


KNOWN_REACH_INS: dict[str, str] = {}
"""Uses of a Store private from outside `harness_store/store` still there -> why."""


def test_nothing_above_the_store_reaches_for_its_privates() -> None:
    """Code above the Store uses its public methods and the operations `store` documents
    for it (`read_snapshot`, `whole_snapshot`, `store.arrow`'s, `store.base`'s)."""
    assert reach_ins() - set(KNOWN_REACH_INS) == set()
    assert set(KNOWN_REACH_INS) - reach_ins() == set(), "gone: remove from KNOWN_REACH_INS"


# What an import loads: the order above read from the modules an import runs, not the names
# it writes. A package's `__init__` runs before any of its modules, so a low module under a
# package whose `__init__` imports the package's services loads them all; only an import can
# show that.

LOAD_PROBE = r"""
import importlib, json, os, sys
for heavy in ("sqlalchemy", "sqlalchemy.orm", "sqlalchemy.ext.asyncio", "alembic", "pyarrow"):
    try:
        importlib.import_module(heavy)  # shared by the children, which only differ after it
    except ImportError:
        pass

def forked(work):
    # work() in a forked child, its JSON answer read back; this process is left as it was
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            answer = work()
        except BaseException as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        answer = json.loads(got.read())
    os.waitpid(child, 0)
    return answer

def loaded(name):
    importlib.import_module(name)
    return {"loaded": sorted(m for m in sys.modules if m.startswith("harness_store"))}

def looked_at(names, depth):
    # {module: answer} for `names`, which share the packages of their first `depth` parts
    # (imported in this process). Several under one more package are looked at in a child that
    # has imported it, since importing any of them runs that package first.
    found, inside = {}, {}
    for name in names:
        parts = name.split(".")
        if len(parts) > depth + 1:
            inside.setdefault(".".join(parts[: depth + 1]), []).append(name)
        else:
            found[name] = forked(lambda: loaded(name))
    for package, inner in inside.items():
        if len(inner) == 1:
            found[inner[0]] = forked(lambda: loaded(inner[0]))
            continue

        def below():
            try:
                importlib.import_module(package)
            except BaseException as exc:  # each of them fails so, its package first
                return {n: {"error": f"{type(exc).__name__}: {exc}"} for n in inner}
            return looked_at(inner, depth + 1)

        found.update(forked(below))
    return found

groups = json.loads(sys.argv[1])
allowed = set()
for group in groups:
    allowed.update(group)
    answers = looked_at(group, 0)
    clean = []
    for name in group:
        found = answers[name]
        print(json.dumps({"module": name, **found}), flush=True)
        parts = name.split(".")
        enclosing = {".".join(parts[:i]) for i in range(1, len(parts))}
        if set(found.get("loaded", ["-"])) <= allowed | enclosing:
            clean.append(name)
    for name in clean:
        importlib.import_module(name)
"""
"""Imports each module named in a process of its own, forked from one that has loaded the
third-party libraries and the modules of the layers below whose imports loaded nothing above
them (a module above a layer is therefore never loaded before an import of that layer looks),
and prints, per module, the package's modules loaded once it was imported. Each group
(a layer's modules) is imported in the parent once looked at, so a layer's children only
load what is new. The modules of one package are forked from a process that has imported
the package (and so on down): importing a module runs its packages first whatever else, so
what it loads is the same, and the package's import is paid once, not once a module."""

NOT_IMPORTED = {
    "harness_store.migrations.env": "a script Alembic runs inside its own context",
}
"""Modules no one imports, which the load check leaves out: module -> why."""

KNOWN_LOADS: dict[tuple[str, str], str] = {}
"""Modules an import loads against the order still in the package: (module, loaded) -> why."""


LOW = "store"
"""The layers below this one are looked at module by module; this one and those above it
(below the face) package by package, since each of their packages loads all of its modules
(the Store is its concerns' mixins), so that a package's import is what any of its modules'
loads."""


def below_the_face() -> list[list[str]]:
    """The modules looked at, each layer's in a group, lowest layer first: every module of the
    layers below `LOW`; every package and top-level module of `LOW` and those above it but
    the face."""
    names = sorted(module_name(path) for path in PACKAGE.rglob("*.py"))
    packages = {module_name(path.parent / "__init__.py") for path in PACKAGE.rglob("__init__.py")}
    low = [name for name, _ in LAYERS].index(LOW)
    groups: list[list[str]] = [[] for _ in LAYERS[:-1]]
    for name in names:
        layer = layer_of(name)[0]
        if layer >= len(groups) or name in NOT_IMPORTED:
            continue
        if layer < low or name in packages or name.count(".") == 1:
            groups[layer].append(name)
    return groups


def loads() -> dict[str, list[str]]:
    """Each module below the face -> the package's modules importing it loads."""
    import json
    import subprocess
    import sys

    groups = below_the_face()
    done = subprocess.run(
        [sys.executable, "-c", LOAD_PROBE, json.dumps(groups)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    found: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        answer = json.loads(line)
        assert "error" not in answer, f"{answer['module']} cannot be imported: {answer['error']}"
        found[answer["module"]] = answer["loaded"]
    assert sorted(found) == sorted(n for group in groups for n in group)
    return found


def load_violations() -> dict[tuple[str, str], str]:
    """(module, loaded) -> why, for each module of the package an import loads from a layer
    above the imported module's (or sideways where `SIDEWAYS` forbids). A package loaded
    only on the way to a module of it is left out, since Python runs it then whatever its
    layer; what it loads is not."""
    found = {}
    for importer, loaded in loads().items():
        mine, my_prefix = layer_of(importer)
        on_the_way = {
            ".".join(parts[:i])
            for parts in (name.split(".") for name in [*loaded, importer])
            for i in range(1, len(parts))
        }
        for name in loaded:
            if name in on_the_way or name == importer:
                continue
            theirs, their_prefix = layer_of(name)
            if theirs > mine:
                found[(importer, name)] = (
                    f"importing it loads {LAYERS[theirs][0]}, a layer above {LAYERS[mine][0]}"
                )
            elif (my_prefix, their_prefix) in SIDEWAYS:
                found[(importer, name)] = f"importing it loads {their_prefix}, sideways"
    return found


def test_no_import_loads_a_layer_above_it() -> None:
    """Importing any module below the face loads nothing of a layer above its own: the
    import statements' order (above) is also what runs, `__init__`s included."""
    found = load_violations()
    new = {k: v for k, v in found.items() if k not in KNOWN_LOADS}
    gone = set(KNOWN_LOADS) - set(found)
    assert new == {}, "make the package's __init__ lazy (harness_store.lazy), or move the module"
    assert gone == set(), "these loads are gone: remove them from KNOWN_LOADS"
