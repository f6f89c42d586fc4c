"""The mark of an unfinished copy: a table that exists in a target only until its rows commit.

Kept apart from the copy itself (and free of the models) because every reader checks it: the
read commands, `Store.open` and `harness-store upgrade` refuse a target a killed copy left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Column, Connection, MetaData, String, Table, inspect

from ..errors import IncompleteCopyError as IncompleteCopyError

if TYPE_CHECKING:
    from ..connector import Connector

COPY_MARKER = "harness_store_copy_in_progress"
"""A table that exists in a target only while a copy into it is unfinished: created (and
committed) right after the schema, dropped in the transaction that commits the rows. A target
that still has it was left by a copy killed before its commit (SIGKILL, power loss)."""


def copy_in_progress(conn: Connection) -> bool:
    """Whether the database on `conn` is the target of an unfinished (killed) copy."""
    return inspect(conn).has_table(COPY_MARKER)


def incomplete_copy_message(shown: str) -> str:
    """What a reader of an unfinished copy is told."""
    return (
        f"{shown} is an unfinished copy (the copy into it was killed before its commit): it "
        "has the schema but none of the rows, so it is not a usable store. Run the same "
        "`harness-store copy` again with --replace (or --resume) to redo it"
    )


def refuse_unfinished_copy(conn: Connection, shown: str) -> None:
    """Refuse a database left by a killed `copy_store` (schema, no rows), named `shown`:
    nothing may read it as a store or write into it (`IncompleteCopyError`)."""
    if copy_in_progress(conn):
        raise IncompleteCopyError(incomplete_copy_message(shown))


def marker_table() -> Table:
    """The marker as a table to create or drop."""
    return Table(COPY_MARKER, MetaData(), Column("source", String(2000)))


def mark_unfinished(target: Connector) -> None:
    """Commit the marker saying this target's copy has not finished (see `COPY_MARKER`)."""
    with target.write() as conn:
        marker_table().create(conn)
