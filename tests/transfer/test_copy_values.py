"""`copy_store` of a store holding foreign values (written with `sqlite3` directly): each
value arrives byte- and type-exact, or the copy is refused naming the table, row and column
with the target emptied again, by the same check sync makes (`transfer.values`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from support.synccheck import write_source
from sync.foreign import CASES, ROW, put, stored

from harness_store.transfer import CopyError, copy_store


def tables_in(target: str) -> list[str]:
    if "://" not in target:
        return ["file"] if Path(target).exists() else []
    engine = create_engine(target)
    try:
        with engine.connect() as conn:
            return inspect(conn).get_table_names()
    finally:
        engine.dispose()


@pytest.mark.parametrize(("table", "column", "value", "what", "sqlite_holds"), CASES)
def test_a_foreign_value_is_copied_exactly_or_refused_by_name(
    store_target: str,
    tmp_path: Path,
    table: str,
    column: str,
    value: str,
    what: str,
    sqlite_holds: bool,
) -> None:
    source = tmp_path / "host.sqlite3"
    write_source(source, runs=2)
    put(source, table, column, value)
    if sqlite_holds and "://" not in store_target:
        copy_store(source, store_target)
        assert stored(store_target, table, column) == stored(source, table, column)
        return
    with pytest.raises(CopyError) as refused:
        copy_store(source, store_target)
    said = str(refused.value)
    assert f"{table}.{column}" in said and f"id={ROW}" in said and what in said, said
    assert tables_in(store_target) == []
