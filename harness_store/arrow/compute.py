"""Typed wrappers of the few Arrow compute calls the tables use, whose stubs type their
results loosely (`object`), so the code using them stays checked."""

from __future__ import annotations

from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc


def filled(values: Any, value: object) -> Any:
    """`values` with its nulls replaced by `value`."""
    return pc.fill_null(values, pa.scalar(value, type=values.type))


def equals(values: Any, value: object) -> Any:
    """Whether each of `values` is `value` (null stays null)."""
    return cast(Any, pc.equal)(values, pa.scalar(value, type=values.type))


def with_column(table: pa.Table, name: str, values: Any) -> pa.Table:
    """`table` with its column `name` replaced by `values`."""
    return table.set_column(table.schema.get_field_index(name), name, values)
