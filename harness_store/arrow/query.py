"""The one statement each Arrow read runs: a table's stored columns, filtered by run, stamp
or id, in key order, with each row's origin beside it on a synced store."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, and_, select

from .. import models as m
from ..errors import InvalidValueError
from ..formats import i64
from ..models.sync import IDS, ORIGINS
from ..stamps import Stamp
from .one_of import OneOf
from .schema import ORIGIN, TableShape


@dataclass(frozen=True)
class Filters:
    """Which rows a read keeps (see `Store.arrow`)."""

    runs: tuple[int, ...] | None = None
    since: Stamp | None = None
    after: int | None = None
    through: int | None = None

    @classmethod
    def of(
        cls,
        runs: Iterable[int] | None,
        since: object,
        after: int | None = None,
        through: int | None = None,
    ) -> Filters:
        """Checked filters: run ids are integers, `since` one instant (`Stamp.parse`)."""
        kept = None if runs is None else tuple(i64(r, "run id") for r in runs)
        instant: Stamp | None = None if since is None else Stamp.parse(since, "since")
        if after is not None:
            after = i64(after, "after")
        if through is not None:
            through = i64(through, "through")
        return cls(kept, instant, after, through)


def read_statement(
    shape: TableShape, stored: list[str], filters: Filters, *, origin: bool
) -> Select[tuple[object, ...]]:
    """The statement reading `stored` columns of `shape`'s table (and `origin` when asked)."""
    table = shape.table
    statement = select(*(table.c[name] for name in stored))
    if origin:
        statement = _with_origin(statement, shape)
    clauses: list[ColumnElement[bool]] = []
    run_column = table.c[shape.run_column] if shape.run_column is not None else None
    if filters.runs is not None and run_column is not None:
        clauses.append(OneOf(run_column, filters.runs))
    if filters.since is not None:
        if shape.stamp_column is not None:
            clauses.append(filters.since.at_or_after(table.c[shape.stamp_column]))
        elif run_column is not None:
            started = select(m.Run.id).where(filters.since.at_or_after(m.Run.started_at))
            clauses.append(run_column.in_(started.scalar_subquery()))
    for bound in (filters.after, filters.through):
        if bound is not None and not shape.append_only:
            raise InvalidValueError(f"{shape.name} is not append-only: it has no high-water mark")
    if filters.after is not None:
        clauses.append(table.c[shape.key[0]] > filters.after)
    if filters.through is not None:
        clauses.append(table.c[shape.key[0]] <= filters.through)
    if clauses:
        statement = statement.where(and_(*clauses))
    return statement.order_by(*(table.c[k] for k in shape.key))


def _with_origin(
    statement: Select[tuple[object, ...]], shape: TableShape
) -> Select[tuple[object, ...]]:
    """Join each row to the origin of its run (a session: of itself) through sync's id map;
    a row written centrally has none (NULL)."""
    table = shape.table
    if shape.run_column is not None:
        mapped, column = "runs", table.c[shape.run_column]
    else:
        mapped, column = shape.name, table.c[shape.key[0]]
    origins = (
        select(IDS.c.dest_id, ORIGINS.c.uuid)
        .join(ORIGINS, ORIGINS.c.id == IDS.c.origin_id)
        .where(IDS.c.tbl == mapped)
        .subquery("hs_origin_of")
    )
    return (
        statement.add_columns(origins.c.uuid.label(ORIGIN))
        .select_from(table)
        .outerjoin(origins, origins.c.dest_id == column)
    )
