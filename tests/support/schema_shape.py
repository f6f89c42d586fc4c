"""A store's schema as facts to compare, on SQLite and PostgreSQL: its tables, each one's
columns (type, nullability, default), primary key and indexes (columns, uniqueness, partial
condition); and a store put back to what an io-harness release leaves (no stamp, no `hs_`
index), from a new store taken down the chain."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, inspect, text

from harness_store.engine import to_url
from harness_store.releases import revision_for
from harness_store.schema import migrate

Shape = dict[str, dict[str, Any]]


def _engine(target: str) -> Engine:
    return create_engine(to_url(target))


def schema_shape(target: str) -> Shape:
    """Table → its columns, primary key and indexes, as SQLAlchemy's inspector reflects them."""
    engine = _engine(target)
    try:
        inspector = inspect(engine)
        shape: Shape = {}
        for table in sorted(inspector.get_table_names()):
            columns = [
                (c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                for c in inspector.get_columns(table)
            ]
            indexes = {
                str(i["name"]): (
                    tuple(i["column_names"]),
                    bool(i["unique"]),
                    tuple(
                        sorted(
                            (k, str(v))
                            for k, v in i.get("dialect_options", {}).items()
                            if k.endswith("_where")
                        )
                    ),
                )
                for i in inspector.get_indexes(table)
            }
            key = tuple(inspector.get_pk_constraint(table)["constrained_columns"])
            shape[table] = {"columns": columns, "primary_key": key, "indexes": indexes}
        return shape
    finally:
        engine.dispose()


def differences(got: Shape, want: Shape) -> list[str]:
    """What `got` lacks or has beyond `want`, one line each (empty when they agree)."""
    out = [f"table {t} missing" for t in sorted(set(want) - set(got))]
    out += [f"table {t} extra" for t in sorted(set(got) - set(want))]
    for table in sorted(set(got) & set(want)):
        g, w = got[table], want[table]
        if g["columns"] != w["columns"]:
            out.append(f"{table} columns {g['columns']} != {w['columns']}")
        if g["primary_key"] != w["primary_key"]:
            out.append(f"{table} primary key {g['primary_key']} != {w['primary_key']}")
        for name in sorted(set(w["indexes"]) - set(g["indexes"])):
            out.append(f"index {name} on {table} missing")
        for name in sorted(set(g["indexes"]) - set(w["indexes"])):
            out.append(f"index {name} on {table} extra")
        for name in sorted(set(g["indexes"]) & set(w["indexes"])):
            if g["indexes"][name] != w["indexes"][name]:
                out.append(f"index {name} {g['indexes'][name]} != {w['indexes'][name]}")
    return out


def as_io_harness_leaves(target: str, release: str) -> None:
    """Take the new head store at `target` down to `release` and remove what io-harness never
    writes: the `alembic_version` stamp and every `hs_` index (a release's own open creates
    neither). What is left is the shape that release's open gives, which `detect` finds
    without a stamp."""
    migrate.downgrade(target, revision_for(release), backup=False)
    engine = _engine(target)
    try:
        inspector = inspect(engine)
        own = [
            str(i["name"])
            for table in inspector.get_table_names()
            for i in inspector.get_indexes(table)
            if str(i["name"]).startswith("hs_")
        ]
        tables = [t for t in inspector.get_table_names() if t.startswith("hs_")]
        assert not tables, f"a store at {release} should hold no hs_ table: {tables}"
        with engine.begin() as conn:
            for name in own:
                conn.execute(text(f'DROP INDEX "{name}"'))
            conn.execute(text("DROP TABLE alembic_version"))
    finally:
        engine.dispose()
