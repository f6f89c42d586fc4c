"""Facts about SQLite's files and errors are spelled in one place each: the side files' suffixes
(`-wal`, `-shm`, `-journal`, `-writers`) in `dialects/read_only_files.py` and
`dialects/sqlite_queue.py`, and a driver error's result code (`sqlite_errorcode`) read only in
`dialects/sqlite_codes.py`. Everything else builds on those names, so a side file or a code is
never known two ways."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "harness_store"

SUFFIXES = frozenset({"-wal", "-shm", "-journal", "-writers"})

SUFFIX_HOMES = frozenset({"dialects/read_only_files.py", "dialects/sqlite_queue.py"})

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


# A backend is chosen by the registry (`dialects.registry`), and neutral code asks the backend
# it is given (`Backend`'s methods) for what differs: only a backend's own modules name it.

BACKEND_MODULES = ("harness_store.dialects.sqlite", "harness_store.dialects.postgresql")
"""A backend's modules: these and every module whose name starts with one of them
(`sqlite_codes`, `postgresql_roles`, …)."""

DRIVERS = ("sqlite3", "psycopg")
"""The drivers' modules (and their submodules, `psycopg.errors`, `psycopg_pool`)."""

BACKEND_SPECIFIC = {
    "dialects/": "the backends themselves, and the registry that finds them",
    "connector/sqlite.py": "SQLite's connector: one kept connection and its text decoding",
    "connector/translation.py": "the one translation of driver errors: it tells a driver's "
    "errors by their classes and reads each backend's codes",
    "sync/roles.py": "`harness-store roles`, the procedure over a PostgreSQL centre's roles",
    "schema/backup.py": "the backup of a SQLite file taken before its revision changes",
}
"""Modules backend-specific by nature, which may name a backend (a folder ends in `/`):
module -> why. Every other module is neutral."""

KNOWN_BACKEND_NAMES: dict[str, str] = {
    "schema/preflight.py": "SQLite's result codes of a failed upgrade (disk full, not a "
    "database), read from the driver error; to go to the connector's one translation",
    "store/prune_archive.py": "the writers' queue's side file (`QUEUE_SUFFIX`) of an archive",
}
"""Neutral modules that still name a backend: module -> why; the list only shrinks."""


def _named_backends(path: Path) -> set[str]:
    """What in `path` names a backend: imports of a backend's or a driver's modules
    (anywhere: top, function, typing only), and strings that name a driver's module (a
    check of `type(exc).__module__`); docstrings and messages that merely mention one are
    left alone."""
    module = path.relative_to(PACKAGE).with_suffix("").parts
    package = ["harness_store", *module[:-1]]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            names = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Compare):
            names = [
                c.value
                for c in [*node.comparators, node.left]
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
        ):
            names = [
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
        for name in names:
            if name.startswith(BACKEND_MODULES) or name.split(".")[0].startswith(DRIVERS):
                found.add(name)
    return found


def backend_namers() -> dict[str, set[str]]:
    """Each neutral module (relative to the package) that names a backend -> what it names."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if any(
            module == place or (place.endswith("/") and module.startswith(place))
            for place in BACKEND_SPECIFIC
        ):
            continue
        named = _named_backends(path)
        if named:
            found[module] = named
    return found


def test_neutral_modules_name_no_backend() -> None:
    """Outside a backend's own modules (`BACKEND_SPECIFIC`), no module imports a backend's
    module (`dialects.sqlite*`, `dialects.postgresql*`) or a driver (`sqlite3`, `psycopg*`),
    nor tells a driver by its module's name: it asks the backend the registry gives it."""
    found = backend_namers()
    assert set(found) - set(KNOWN_BACKEND_NAMES) == set(), found
    assert set(KNOWN_BACKEND_NAMES) - set(found) == set(), "gone: remove from the list"


POSTGRESQL_LOADED = (
    "print(sorted(m for m in sys.modules if m.startswith(('harness_store.dialects.postgresql', "
    "'psycopg')) and not m.endswith('_codes')))"
)
"""What of PostgreSQL's a process has loaded: its backend's modules and psycopg (its table of
codes, constants the one translation reads, aside)."""


def test_a_backend_module_is_imported_only_when_its_store_is_met() -> None:
    """Finding the SQLite backend imports no PostgreSQL module (nor psycopg): the registry
    imports a backend's module on first use."""
    import subprocess
    import sys

    probe = (
        "import sys; from harness_store.dialects import backend_named; "
        f"backend_named('sqlite'); {POSTGRESQL_LOADED}"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_sqlite_store_loads_no_postgresql_module() -> None:
    """A SQLite store written, read, refused a bad value and checked loads none of
    PostgreSQL's modules: the connector's translation and the check ask the backend they
    are given, not PostgreSQL's module."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from harness_store import Store\n"
        "from harness_store.errors import StoreError\n"
        "with Store.memory() as store:\n"
        "    run = store.start_run('goal', 'out.txt')\n"
        "    store.runs()\n"
        "    store.check()\n"
        "    try:\n"
        "        store.finish_run(run + 100, 'completed')\n"
        "    except StoreError:\n"
        "        pass\n"
        f"{POSTGRESQL_LOADED}"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
