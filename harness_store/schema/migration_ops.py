"""Idempotent schema operations for the migration chain.

Upstream migrates by "add it if it is missing", so a store can be torn anywhere between two
releases. Every operation here checks the live schema first and does only what is missing (or,
going down, only what is present); in offline (`--sql`) mode there is no live schema, so it
emits the plain statement — for an index, `IF NOT EXISTS`/`IF EXISTS`, which both backends
take, so a script applies to a store whether or not it holds one. Columns are added with
`ALTER TABLE … ADD COLUMN`, never by copying a table: that is O(1), keeps upstream's table
definitions, and cannot lose rows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from ..dialects import Backend, backend_named
from ..sqltypes import INT

__all__ = [
    "INT",
    "WAL_AFTER_COMMIT",
    "add_columns",
    "create_index",
    "create_table",
    "create_times_views",
    "drop_columns",
    "drop_index",
    "drop_table",
    "drop_times_views",
    "lower_checkpoint_format",
    "raise_checkpoint_format",
    "recreate_times_view",
    "switch_to_wal",
]


def _offline() -> bool:
    return context.is_offline_mode()


def _backend() -> Backend:
    return backend_named(op.get_context().dialect.name)


def _has_table(name: str) -> bool:
    return sa.inspect(op.get_bind()).has_table(name)


def _columns(table: str) -> set[str]:
    """The table's column names, or none when it is not there. One table is reflected, not the
    whole schema: the chain asks this at every step, and on PostgreSQL each reflection is a
    catalog query."""
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table(table):
        return set()
    return {c["name"] for c in inspector.get_columns(table)}


def _indexes(table: str) -> set[str]:
    return {str(i["name"]) for i in sa.inspect(op.get_bind()).get_indexes(table)}


def id_column() -> sa.Column[int]:
    """Upstream's `id INTEGER PRIMARY KEY` (AUTOINCREMENT is a table option)."""
    return sa.Column("id", INT, primary_key=True, nullable=True)


def create_table(name: str, *columns: sa.Column[Any], autoincrement: bool = True) -> None:
    """Create a table that is not there yet, with upstream's AUTOINCREMENT where it has one."""
    if not _offline() and _has_table(name):
        return
    op.create_table(name, *columns, sqlite_autoincrement=autoincrement)


def drop_table(name: str) -> None:
    """Drop a table if it is there."""
    if not _offline() and not _has_table(name):
        return
    op.drop_table(name)


def add_columns(table: str, *columns: sa.Column[Any]) -> None:
    """Add each column the table lacks, by `ALTER TABLE … ADD COLUMN`."""
    have = set() if _offline() else _columns(table)
    for column in columns:
        if column.name not in have:
            op.add_column(table, column)


def drop_columns(table: str, *names: str) -> None:
    """Drop each named column the table has (SQLite ≥ 3.35 `ALTER TABLE … DROP COLUMN`)."""
    have = set(names) if _offline() else _columns(table)
    for name in names:
        if name in have:
            op.drop_column(table, name)


def create_index(
    name: str,
    table: str,
    columns: list[str],
    *,
    unique: bool = False,
    where: str | None = None,
) -> None:
    """Create an index that is not there yet (`where`: a partial index's condition). Offline
    (`--sql`) the statement is `CREATE INDEX IF NOT EXISTS`: a script cannot look, and a store
    stamped at its release may or may not hold an index the chain creates (`hs4` fills in
    what the revisions before it may already have made)."""
    if not _offline() and name in _indexes(table):
        return
    options: dict[str, Any] = {}
    if where is not None:
        options = {"sqlite_where": sa.text(where), "postgresql_where": sa.text(where)}
    op.create_index(name, table, columns, unique=unique, if_not_exists=_offline(), **options)


def drop_index(name: str, table: str) -> None:
    """Drop an index if it is there. Offline (`--sql`) the statement is `DROP INDEX IF
    EXISTS`: a store stamped above `hs1` never got the `hs_` indexes a later revision drops
    (0.30's `hs_sandbox_events_run_id`, `hs2`'s `hs_steps_run_id_step`)."""
    if not _offline() and name not in _indexes(table):
        return
    op.drop_index(name, table_name=table, if_exists=_offline())


def raise_checkpoint_format(version: int) -> None:
    """Stamp the checkpoint-format marker to `version` when it is lower (0.7's rule)."""
    backend = _backend()
    if _offline():
        for statement in backend.checkpoint_format_sql(version):
            op.execute(statement)
        return
    backend.raise_checkpoint_format(op.get_bind(), version)


def lower_checkpoint_format() -> None:
    """Put the marker back to a pre-0.7 store's."""
    for statement in _backend().drop_checkpoint_format_sql():
        op.execute(statement)


WAL_AFTER_COMMIT = "harness_store.wal_after_commit"
"""The `config.attributes` key under which an offline run notes that its script owes 0.12's
switch to WAL: `harness_store.schema.offline_script` writes the statements after the COMMIT."""


def switch_to_wal() -> None:
    """0.12's switch of a file store to WAL. The switch cannot run inside a transaction (SQLite
    ignores it there), so online it is left to `harness_store.schema.wal_switch`, which switches
    only after the upgrade has committed (a failed upgrade leaves even the file header as it
    was); offline (`--sql`) it is noted here, and the script runs it after its COMMIT."""
    if _offline() and _backend().wal_sql():
        config = op.get_context().config
        if config is not None:
            config.attributes[WAL_AFTER_COMMIT] = True


def create_times_views(shape: Mapping[str, Collection[str]]) -> None:
    """On PostgreSQL, `hs_stamp` and a `<table>_times` view of each table of `shape` (table →
    the columns it has at the revision) that holds a stamp; nothing on SQLite, whose stores
    upstream opens (`Backend.typed_times_sql`)."""
    for statement in _backend().typed_times_sql(shape):
        op.execute(statement)


def recreate_times_view(table: str, columns: Collection[str]) -> None:
    """On PostgreSQL, `table`'s view made again over `columns`: what a later revision that adds
    or drops a column of a table with stamps calls (a view over a column blocks dropping it or
    changing its type: drop the views first with `drop_times_views`, change the table, then
    make them again)."""
    for statement in _backend().typed_times_view_sql(table, columns):
        op.execute(statement)


def drop_times_views() -> None:
    """On PostgreSQL, every typed-times view and `hs_stamp`, where they are."""
    for statement in _backend().drop_typed_times_sql():
        op.execute(statement)
