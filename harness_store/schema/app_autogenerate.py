"""What an application's own Alembic `env.py` passes its `context.configure` so that its
autogenerate (`alembic revision --autogenerate`, `alembic check`) leaves a store in a
PostgreSQL schema of its own alone: with `include_schemas=True` Alembic reflects every schema of
the database, and without these filters it proposes to drop each table of the store and its
`alembic_version`, which are not in the application's models.

    store = leave_store_alone("harness")
    context.configure(..., include_schemas=True,
                      include_name=store.include_name, include_object=store.include_object)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..targets import checked_schema


@dataclass(frozen=True)
class StoreLeftAlone:
    """Alembic's `include_name` and `include_object` hooks that leave out the schema `schema`
    and everything in it; the application's own schemas and objects are compared as before."""

    schema: str

    def include_name(self, name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
        """Alembic's `include_name`: the store's schema is not reflected at all (nor, should
        an application's filter let it through, any table or index named in it)."""
        if type_ == "schema":
            return name != self.schema
        return parent_names.get("schema_name") != self.schema

    def include_object(
        self, obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
    ) -> bool:
        """Alembic's `include_object`: nothing of a table in the store's schema is compared
        (a table, or its columns, indexes and constraints), whichever way it was found."""
        table = obj if type_ == "table" else getattr(obj, "table", None)
        return getattr(table, "schema", None) != self.schema


def leave_store_alone(schema: str) -> StoreLeftAlone:
    """The hooks that leave the store in `schema` (the name given as `Store.open(...,
    schema=…)`, `--schema` or `-x schema=`) out of an application's autogenerate; a name that
    no store could live in raises `InvalidTargetError`."""
    return StoreLeftAlone(checked_schema(schema, "postgresql"))
