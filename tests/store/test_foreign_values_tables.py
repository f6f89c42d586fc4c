"""The rule of docs/guides/values.md in each kind of table: a foreign value (written with
`sqlite3` directly, as another writer leaves it) arrives byte- and type-exact, or is refused by
name (the table, the column and the row; one line from a command), before anything of that
unit is written; `check` names it. The page's table holds it for a step (an append-only row)
and a lease; this module writes each kind of value into a run (a row updated in place), a
memory entry (keyed by text) and a lease's text, and runs every path on it: the Store's reads,
the read commands, `copy` into SQLite and into PostgreSQL, `prune --archive-to`, `export
parquet`, `export otlp` and `check` (`sync`'s, which quarantines a refused source, is held by
tests/sync). Slow: each value × table × path is a store and a command."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support.clirun import run_in_process
from support.foreign_values import foreign_store as write_foreign
from test_value_paths import (
    Kind,
    Outcome,
    archive,
    cell_of,
    check,
    compared,
    into_postgresql,
    named,
    otlp,
    parquet,
    refused_or,
)

from harness_store import Store
from harness_store.store.listings import Listings

pytestmark = pytest.mark.slow

TEXTS: dict[str, tuple[str, Any]] = {
    "NUL": ("CAST(X'610062' AS TEXT)", "a\0b"),
    "not UTF-8": ("CAST(X'70FF71' AS TEXT)", b"p\xffq"),
    "BLOB": ("X'00FF10'", b"\x00\xff\x10"),
}
"""Values SQLite keeps in a TEXT column: (as SQL, as an exact read gives it back). A number
is none of them: a column declared TEXT has SQLite's text affinity, which stores `42` as the
text `'42'`."""

INTEGERS: dict[str, tuple[str, Any]] = {
    "text": ("'many'", "many"),
    "fraction": ("1.5", 1.5),
    "Infinity": ("9e999", float("inf")),
    "past 64 bits": (str(2**64), float(2**64)),
}
"""Values SQLite keeps in an INTEGER column (a literal past 64 bits is stored as a REAL)."""

COLUMNS: dict[str, tuple[str, str]] = {
    "runs": ("goal", "depth"),
    "memory": ("value", "step"),
    "run_leases": ("owner", "generation"),
}
"""Each kind of table's text column and integer column."""

EXACT_OR_REFUSED = {"exact", "refused", "unread"}
"""What the rule lets a path do with a value (a command that does not show the column shows
the rest exactly: `trace` of a run whose depth is text)."""

ACCEPTED = {
    "check": {"named"},
    "the read commands": EXACT_OR_REFUSED | {"replaced"},
}
"""Where the rule says more: `check` names every such value, and a read command shows text
whose bytes are not UTF-8 with U+FFFD for them, saying how many values it so showed."""

CASES = [
    (table, column, name, sql, python)
    for table, (text_column, integer_column) in COLUMNS.items()
    for column, values in ((text_column, TEXTS), (integer_column, INTEGERS))
    for name, (sql, python) in values.items()
]


def foreign_store(path: Path, kind: Kind) -> int:
    """`support.foreign_values.foreign_store` holding `kind`'s value; the run's id."""
    return write_foreign(path, kind.table, kind.column, kind.sql)


def store_reads(kind: Kind, source: Path) -> Outcome:
    """What the Store's reads of the table give back of the value."""
    with Store.open(source, read_only=True) as store:
        try:
            if kind.table == "runs":
                Listings(store).run_page()
                store.tree(1)
                (value,) = [getattr(r, kind.column) for r in Listings(store).run_page()]
            elif kind.table == "memory":
                (entry,) = store.memory_list("ws")
                value = getattr(entry, kind.column)
            else:
                lease = store.run_lease(1)
                value = getattr(lease, kind.column)
        except Exception as exc:
            return "refused" if named(str(exc), kind) else f"unnamed: {exc}"
    said = compared(value, kind)
    return said if isinstance(said, str) else "exact" if said else f"changed: {value!r}"


def commands(kind: Kind, source: Path) -> Outcome:
    """What the read commands that show the table do with the value."""
    shows = {
        "runs": [("runs", source), ("tree", source, "1"), ("trace", source, "1")],
        "memory": [("memory", source, "ws")],
        "run_leases": [("runs", source)],
    }
    outcomes = set()
    for args in shows[kind.table]:
        done = run_in_process(*args)

        def exact(shown: str = done.stdout + done.stderr) -> Outcome | bool:
            if isinstance(kind.python, bytes) and "\ufffd" in shown:
                return "replaced" if "held bytes that are not UTF-8" in shown else "unsaid"
            return True

        outcomes.add(refused_or(done, kind, exact))
    return ", ".join(sorted(outcomes))


def copied(work: Path, source: Path, kind: Kind) -> Outcome:
    """What `copy` into a SQLite store does with the value (`sync`'s, which quarantines a
    source it refuses, is tests/sync's)."""
    target = work / "copy.sqlite3"
    done = run_in_process("copy", source, target)
    return refused_or(done, kind, lambda: cell_of(target, kind) == cell_of(source, kind))


def sent(work: Path, source: Path, kind: Kind) -> Outcome:
    """What `export otlp` does with the value: it sends a run's goal and depth; a workspace's
    memory and a lease are no part of a trace (`unread`)."""
    outcome = otlp(work, source, kind, None)
    return "unread" if kind.table == "memory" and outcome == "changed" else outcome


def archived(work: Path, source: Path, kind: Kind) -> Outcome:
    """What `prune --archive-to` does with the value: a workspace's memory is no run's, so a
    prune of runs neither archives nor reads it (`unread`)."""
    outcome = archive(work, source, kind, None)
    if kind.table == "memory" and outcome == "changed":
        with closing(sqlite3.connect(work / "archive.sqlite3")) as conn:
            if conn.execute("SELECT count(*) FROM memory").fetchone() == (0,):
                return "unread"
    return outcome


@pytest.mark.parametrize(("table", "column", "name", "sql", "python"), CASES)
def test_each_path_takes_the_value_exactly_or_refuses_it_by_name(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    table: str,
    column: str,
    name: str,
    sql: str,
    python: Any,
) -> None:
    kind = Kind(table, column, sql, python)
    pg_url = request.getfixturevalue("pg_url")
    paths = {
        "copy into SQLite": lambda work, source: copied(work, source, kind),
        "copy into PostgreSQL": lambda work, source: into_postgresql(work, source, kind, pg_url),
        "prune --archive-to": lambda work, source: archived(work, source, kind),
        "export parquet": lambda work, source: parquet(work, source, kind, None),
        "export otlp": lambda work, source: sent(work, source, kind),
        "the Store's reads": lambda work, source: store_reads(kind, source),
        "the read commands": lambda work, source: commands(kind, source),
        "check": lambda work, source: check(work, source, kind, None),
    }
    seen = {}
    for path, run in paths.items():
        work = tmp_path / path.replace(" ", "_")
        work.mkdir()
        source = work / "runs.sqlite3"
        foreign_store(source, kind)
        seen[path] = run(work, source)
    wrong = {
        path: outcome
        for path, outcome in seen.items()
        if not set(outcome.split(", ")) <= ACCEPTED.get(path, EXACT_OR_REFUSED)
    }
    assert not wrong, "; ".join(f"{path}: {outcome}" for path, outcome in wrong.items())
