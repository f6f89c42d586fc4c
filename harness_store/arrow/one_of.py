"""A column's value among many ids, the ids sent as one parameter: how an Arrow read keeps the
rows of the runs asked for, however many (`Store.arrow(table, runs=…)`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Boolean, ColumnElement, String, bindparam
from sqlalchemy.sql.visitors import InternalTraversal


class OneOf(ColumnElement[bool]):
    """`column` is one of `ids`, however many: the ids go as one parameter (a JSON array),
    never one each, which the drivers limit (PostgreSQL's to 65,535 a statement). Each
    backend reads the array as a set of its own (`dialects.base`), so the rows come in key
    order as for a plain `IN`, and the statement is compiled once whatever the count."""

    inherit_cache = True
    type = Boolean()
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy's own declaration
        ("column", InternalTraversal.dp_clauseelement),
        ("ids", InternalTraversal.dp_clauseelement),
    ]

    def __init__(self, column: ColumnElement[Any], ids: Iterable[int]) -> None:
        self.column = column
        self.ids = bindparam("hs_ids", json.dumps(list(ids)), type_=String(), unique=True)
