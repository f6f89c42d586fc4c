"""The rule of docs/guides/values.md for sync, in the memory and lease tables: a foreign value
(written with `sqlite3` directly, as another writer leaves it: NUL, bytes that are not UTF-8, a
BLOB in a TEXT column, text, a fraction or Infinity in an INTEGER column) in a memory entry or
a lease of a source arrives byte- and type-exact, or its run is quarantined by name (the
table and the column), or its source is refused by name with nothing of it written; the other
source is synced exactly, into SQLite and into PostgreSQL."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from support.foreign_values import foreign_store
from support.synccheck import mirror_problems, write_source

from harness_store.errors import SyncRefusedError
from harness_store.sync import list_origins, quarantined, sync

VALUES = {
    "NUL": "CAST(X'610062' AS TEXT)",
    "not UTF-8": "CAST(X'70FF71' AS TEXT)",
    "BLOB": "X'00FF10'",
    "text": "'many'",
    "fraction": "1.5",
    "Infinity": "9e999",
}

CASES = [
    (table, column, name)
    for table, (text_column, integer_column) in {
        "memory": ("value", "step"),
        "run_leases": ("owner", "generation"),
    }.items()
    for column, names in (
        (text_column, ("NUL", "not UTF-8", "BLOB")),
        (integer_column, ("text", "fraction", "Infinity")),
    )
    for name in names
]


def kept(path: str | Path, table: str, column: str) -> list[tuple[str, bytes | None]]:
    """The column's values as SQLite keeps them: storage class and bytes."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        rows = conn.execute(f"SELECT typeof({column}), CAST({column} AS BLOB) FROM {table}")
        return sorted((kind, None if raw is None else bytes(raw)) for kind, raw in rows)


@pytest.mark.parametrize(("table", "column", "name"), CASES)
def test_a_foreign_value_in_memory_or_a_lease_is_exact_quarantined_or_refused_by_name(
    store_target: str, tmp_path: Path, table: str, column: str, name: str
) -> None:
    host, other = tmp_path / "host.sqlite3", tmp_path / "other.sqlite3"
    run = foreign_store(host, table, column, VALUES[name])
    write_source(other, runs=1, tag="o")
    refused: SyncRefusedError | None = None
    try:
        sync([host, other], store_target)
    except SyncRefusedError as exc:
        refused = exc
    held = {q.run: q for q in quarantined(store_target)}
    if refused is not None:  # nothing of the host written; the reason names the value
        said = str(refused)
        assert f"{table}.{column}" in said or (table in said and column in said), said
        assert [o.path for o in list_origins(store_target)] == [str(other.resolve())]
    elif run in held:
        entry = held[run]
        assert (entry.table, entry.column) == (table, column), entry
        assert len(list_origins(store_target)) == 2
    else:  # exact: only a SQLite centre can keep such a value as it is
        assert "://" not in store_target, f"{name} in {table}.{column} reached PostgreSQL"
        foreign = [v for v in kept(host, table, column) if v not in kept(other, table, column)]
        assert foreign and set(foreign) <= set(kept(store_target, table, column))
    assert mirror_problems(store_target, other) == []
