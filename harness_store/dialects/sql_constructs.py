"""The package's own SQL constructs, rendered per backend: `DrivingJoin` (a join whose left
side drives) and `OneOf` (a column among a JSON array's values). Imported with the package
(`dialects/__init__.py`), so each is compiled the backend's way wherever it is used."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.selectable import Join

from ..arrow.one_of import OneOf


class DrivingJoin(Join):
    """A join whose left side drives: for each of its rows, the right side is sought through
    an index on the join columns. Rendered as a plain join, except where a backend must be
    told (SQLite: `CROSS JOIN`, which its planner never reorders), because a cost guess there
    would scan the whole right table instead (upstream pins the same reads the same way)."""

    inherit_cache = True


@compiles(DrivingJoin)
def _plain_join(join: DrivingJoin, compiler: SQLCompiler, **kw: Any) -> str:
    rendered: str = compiler.visit_join(join, **kw)  # type: ignore[no-untyped-call]
    return rendered


@compiles(OneOf)
def _one_of_json_each(element: OneOf, compiler: SQLCompiler, **kw: Any) -> str:
    """SQLite: the JSON array's values as a table (`json_each`), sought in the column's
    index as an `IN` list is."""
    column, ids = compiler.process(element.column, **kw), compiler.process(element.ids, **kw)
    return f"{column} IN (SELECT value FROM json_each({ids}))"


@compiles(OneOf, "postgresql")
def _one_of_jsonb(element: OneOf, compiler: SQLCompiler, **kw: Any) -> str:
    """PostgreSQL: the JSON array's elements as a set of `bigint`s."""
    column, ids = compiler.process(element.column, **kw), compiler.process(element.ids, **kw)
    return (
        f"{column} IN (SELECT CAST(value AS BIGINT) "
        f"FROM jsonb_array_elements_text(CAST({ids} AS JSONB)))"
    )
