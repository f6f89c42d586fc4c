"""The models as the commands that compare them with a database see them (`alembic check`,
`revision --autogenerate`, `--sql`): the metadata per dialect, what is left out of the
comparison, and Alembic's notes on SERIAL keys left unsaid. An upgrade never reads them."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from alembic.operations.ops import AlterColumnOp, ModifyTableOps

if TYPE_CHECKING:
    from sqlalchemy import MetaData


def models_metadata() -> MetaData:
    """The models' metadata, imported only by the commands that compare the database with the
    models (`check`, `revision --autogenerate`, `--sql`): an upgrade's steps are written out
    in full and never consult it (it has no naming convention), and importing 37 models is a
    good part of a no-op `alembic upgrade head`'s time."""
    from ..models import Base

    return Base.metadata


def models_metadata_for(dialect_name: str) -> MetaData:
    """The models as a store of `dialect_name` declares them. The models keep upstream's
    SQLite shape, where `id INTEGER PRIMARY KEY` carries no NOT NULL; PostgreSQL makes every
    primary key NOT NULL, so for it the keys are compared as NOT NULL: an intended difference
    is no difference, and a key that lost its NOT NULL still is one."""
    if dialect_name != "postgresql":
        return models_metadata()
    return _keys_not_null()


@functools.cache
def _keys_not_null() -> MetaData:
    from sqlalchemy import MetaData

    source = models_metadata()
    copy = MetaData(naming_convention=source.naming_convention)
    for table in source.sorted_tables:
        table.to_metadata(copy)
    for table in copy.tables.values():
        for column in table.primary_key.columns:
            column.nullable = False
    return copy


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Leave to newer io-harness releases what is theirs: compare only the 0.13 tables."""
    if type_ == "table":
        return name in models_metadata().tables
    return True


def ignore_key_nullability(context: Any, revision: Any, directives: list[Any]) -> None:
    """Drop autogenerate's "primary key nullable" diffs, and only those.

    The models declare upstream's SQLite shape, where `id INTEGER PRIMARY KEY` carries no
    explicit NOT NULL (`PRAGMA table_info` says notnull 0); a store whose key says NOT NULL
    anyway differs from them in nothing worth a migration. A key the database lets be NULL
    where the models say NOT NULL (PostgreSQL's, `models_metadata_for`) is kept: that one is
    real.
    """
    for script in directives:
        for upgrade_ops in script.upgrade_ops_list:
            for table_ops in list(upgrade_ops.ops):
                if not isinstance(table_ops, ModifyTableOps):
                    continue
                table_ops.ops = [
                    op
                    for op in table_ops.ops
                    if not (
                        isinstance(op, AlterColumnOp)
                        and op.modify_nullable is True
                        and _is_key(op.table_name, op.column_name)
                        and not (op.modify_type or op.modify_server_default or op.modify_name)
                    )
                ]
                if not table_ops.ops:
                    upgrade_ops.ops.remove(table_ops)


SERIAL_NOTE = "Detected sequence named '%s' as owned by integer column '%s(%s)'"
"""The start of the line Alembic's PostgreSQL support logs at INFO for every SERIAL key it
reflects (and rightly leaves out of the comparison)."""


class _OwnSerialKeys(logging.Filter):
    """Drops Alembic's note on a SERIAL key of one of the models' tables: said once for
    each of some 35 tables on every `alembic check`, about nothing that differs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(SERIAL_NOTE) or len(record.args or ()) != 3:
            return True
        _, table, column = record.args  # type: ignore[misc]
        model = models_metadata().tables.get(str(table))
        return model is None or str(column) not in model.primary_key.columns


@contextmanager
def quiet_about_serial_keys() -> Iterator[None]:
    """While a comparison runs, leave out Alembic's notes on the models' SERIAL keys."""
    logger = logging.getLogger("alembic.ddl.postgresql")
    note = _OwnSerialKeys()
    logger.addFilter(note)
    try:
        yield
    finally:
        logger.removeFilter(note)


def _is_key(table: str, column: str) -> bool:
    model = models_metadata().tables.get(table)
    return model is not None and column in model.primary_key.columns
