"""One way to the database: outside the connector (`connector/`) and the dialects
(`dialects/`), no module of the package touches a DBAPI connection — it neither opens one
with a driver's `connect` nor reaches one under a SQLAlchemy connection — nor opens a
connection or a transaction of its own (`.connect()`, `.begin()`, `.begin_nested()`), nor
sets what a connection's next transaction is (`conn.info[...]`): every connection and
transaction of the package is the connector's, so the writers' queue covers every SQLite
write. Read from the package's source (its syntax tree), so a new way in fails here before
it is merged."""

from __future__ import annotations

import ast
from pathlib import Path

import harness_store

PACKAGE = Path(harness_store.__file__).parent

ALLOWED = ("dialects/", "connector/")
"""Where DBAPI connections live: the connector holds the Store's, the dialects run the
backend's own statements (WAL switch, bulk reads, the pre-upgrade backup) on them."""

JUSTIFIED: dict[str, str] = {
    "otel/transport.py": "its `connect()` opens an HTTP connection to a receiver, no database",
}
"""Module path (relative to the package) → why it may do what the rule refuses."""

DBAPI_ATTRIBUTES = frozenset({"dbapi_connection", "driver_connection", "raw_connection"})
"""SQLAlchemy's ways from a pooled connection down to the driver's."""

DRIVER_CONNECTS = frozenset({"sqlite3", "psycopg", "aiosqlite", "psycopg2", "asyncpg"})
"""Driver modules whose `connect` (or `Connection.connect`) opens a DBAPI connection."""

OWN_CONNECTIONS = frozenset({"connect", "begin", "begin_nested", "begin_twophase"})
"""SQLAlchemy's ways to open a connection (`engine.connect()`) or a transaction
(`conn.begin()`, `engine.begin()`) of one's own, outside the connector."""

INFO_METHODS = frozenset({"get", "pop", "setdefault", "update", "clear"})
"""`conn.info`'s methods: reading or setting what the connection's next `begin` does."""


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a chain of names and attributes, else ''."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def ways_in(source: str) -> list[tuple[int, str]]:
    """Each line of `source` that touches a DBAPI connection, with what it does."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if node.attr in DBAPI_ATTRIBUTES:
                found.append((node.lineno, f".{node.attr}"))
            elif node.attr == "connection" and (
                isinstance(node.value, ast.Attribute) and node.value.attr == "connection"
            ):
                found.append((node.lineno, ".connection.connection"))
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name.endswith(".connect") and name.split(".")[0] in DRIVER_CONNECTS:
                found.append((node.lineno, f"{name}()"))
            elif isinstance(node.func, ast.Attribute) and node.func.attr in OWN_CONNECTIONS:
                found.append((node.lineno, f".{node.func.attr}()"))
            elif (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in INFO_METHODS
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "info"
            ):
                found.append((node.lineno, f".info.{node.func.attr}()"))
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "info"
        ):
            found.append((node.lineno, ".info[]"))
        if (
            isinstance(node, ast.ImportFrom)
            and node.module in DRIVER_CONNECTS
            and any(alias.name == "connect" for alias in node.names)
        ):
            found.append((node.lineno, f"from {node.module} import connect"))
    return sorted(found)


def test_the_detector_sees_each_way_in() -> None:
    """Each way the rule names is caught (so the rule below cannot pass by seeing nothing)."""
    source = "\n".join(
        [
            "import sqlite3",
            "conn = sqlite3.connect('x')",
            "driver = c.connection.driver_connection",
            "raw = engine.raw_connection()",
            "dbapi = c.connection.dbapi_connection",
            "inner = c.connection.connection",
            "import psycopg",
            "pg = psycopg.connect('')",
            "apg = psycopg.AsyncConnection.connect('')",
            "from aiosqlite import connect",
            "with store.engine.connect() as conn:",
            "    conn.info['hs_write'] = True",
            "    with conn.begin(): pass",
            "with engine.begin() as conn: pass",
            "with conn.begin_nested(): pass",
            "previous = conn.info.get('hs_write')",
            "log.info('a message')",
            "with context.begin_transaction(): pass",
        ]
    )
    assert [line for line, _ in ways_in(source)] == [
        2,
        3,
        4,
        5,
        6,
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        15,
        16,
    ]


def test_no_module_outside_the_connector_and_dialects_touches_a_dbapi_connection() -> None:
    offenders: list[str] = []
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100  # the whole package is read
    for module in modules:
        relative = module.relative_to(PACKAGE).as_posix()
        if relative.startswith(ALLOWED) or relative in JUSTIFIED:
            continue
        for line, what in ways_in(module.read_text(encoding="utf-8")):
            offenders.append(f"harness_store/{relative}:{line}: {what}")
    assert offenders == []


SOURCE_READERS = ("sync/", "transfer/")
"""Sync and copy, which read whole source stores."""

OPENS_OF_THEIR_OWN = frozenset(
    {"read_only_url", "read_only_file_url", "read_as_still_file", "writer_appeared", "file_mark"}
)
"""What building a read-only engine, or deciding how to read a still file, takes: the one
read-only open's (`store.open_read_only`) and the dialect's alone."""


def named(source: str) -> set[str]:
    """Every name and attribute `source` uses or imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def test_sync_and_copy_open_their_sources_through_the_one_read_only_open() -> None:
    """No second read-only engine and no second still-file decision beside the one open: sync
    and copy read each source through a read-only Store's connector (`open_source`)."""
    offenders: list[str] = []
    readers = [
        m
        for m in sorted(PACKAGE.rglob("*.py"))
        if m.relative_to(PACKAGE).as_posix().startswith(SOURCE_READERS)
    ]
    assert len(readers) > 10
    for module in readers:
        used = named(module.read_text(encoding="utf-8")) & OPENS_OF_THEIR_OWN
        offenders += [f"{module.relative_to(PACKAGE).as_posix()}: {name}" for name in sorted(used)]
    assert offenders == []
    opening = (PACKAGE / "transfer" / "reading.py").read_text(encoding="utf-8")
    assert "open_read_only" in named(opening)
