"""Typed times for analysts on PostgreSQL: upstream's text stamps as `timestamptz`.

upstream stamps rows as TEXT in two spellings (`2026-12-07T06:51:00.000Z` and SQLite's
`datetime('now')`, `2026-12-07 06:51:00`), so `pandas.read_sql` and dashboards see strings.
The chain's `hs5` creates, on PostgreSQL only, a function `hs_stamp(text) → timestamptz` and
one view per table that holds a stamp, `<table>_times`: every column of the table in its order,
each stamp column (`STAMP_COLUMNS`) replaced under its own name by its instant (and, for
`run_leases`, the lease's `expires_at`). The tables stay as upstream shapes them.

`hs_stamp` reads exactly what `harness_store.stamps.Stamp.read` reads — either spelling, a
date, a date and time with `T` or a space, optional seconds and fraction (truncated to the
microsecond), `Z` or a `±HH[:]MM` offset, none meaning UTC — and gives NULL for anything else
(`later`, `2026-02-30`, an offset of a day or more, an instant outside the years 1 to 9999),
so one bad value never fails a query over a table. It parses explicitly, never through
PostgreSQL's own text-to-timestamptz cast, which reads an offset-less stamp in the session's
TimeZone: the result depends on its argument alone, so the function is IMMUTABLE and an
expression index or a generated column may use it. Only ASCII digits are digits here, as in
`Stamp` (no store holds another script's digits).

Views, not generated columns: a generated column changes upstream's tables (which `copy`,
`sync`, detection and `alembic check` compare with upstream's shape, and which `COPY` would
have to skip), where a view adds an object beside them that nothing else reads; Alembic's
autogenerate compares tables only, so `alembic check` ignores the views. Every name is
unqualified: the function and the views live in the schema the tables live in (the first of
the search path when the chain ran).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType

from ..models import Base

STAMP_FUNCTION = "hs_stamp"
"""The function that reads a stored stamp as `timestamptz` (NULL when it names no instant)."""

VIEW_SUFFIX = "_times"


def _stamp_columns() -> Mapping[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for table in Base.metadata.sorted_tables:
        names = tuple(c.name for c in table.columns if c.name == "at" or c.name.endswith("_at"))
        if names:
            found[table.name] = names
    return MappingProxyType(dict(sorted(found.items())))


STAMP_COLUMNS: Mapping[str, tuple[str, ...]] = _stamp_columns()
"""Each model table that holds a stamp → its stamp columns (upstream names every one `at` or
`…_at`), in the table's order: the one list the views are made from."""

DERIVED: Mapping[str, Mapping[str, tuple[frozenset[str], str]]] = MappingProxyType(
    {
        "run_leases": MappingProxyType(
            {
                "expires_at": (
                    frozenset({"renewed_at", "ttl_secs"}),
                    f"CASE WHEN ttl_secs BETWEEN 0 AND 315537897599 THEN (SELECT CASE WHEN e <="
                    f" timestamptz '9999-12-31 23:59:59.999999+00' THEN e END FROM (SELECT"
                    f" {STAMP_FUNCTION}(renewed_at) + ttl_secs * interval '1 second' AS e) AS x)"
                    f" END",
                )
            }
        )
    }
)
"""Times a view adds after the table's columns: name → (the columns it needs, its SQL). A
lease's expiry is `renewed_at + ttl_secs`, as the Store computes it; NULL where that is no
instant of the years 1 to 9999."""

_WHITESPACE = r"\t\n\v\f\r\x1c-\x20\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""What Python's `str.strip` and `\\s` take as whitespace, as a regular expression's class."""

_FORM = (
    rf"^[{_WHITESPACE}]*([0-9]{{4}})-([0-9]{{2}})-([0-9]{{2}})"
    rf"(?:[T ]([0-9]{{2}})(?::([0-9]{{2}})(?::([0-9]{{2}})(?:\.([0-9]{{1,9}}))?)?)?"
    rf"[{_WHITESPACE}]*(Z|z|[+-][0-9]{{2}}:?[0-9]{{2}})?)?[{_WHITESPACE}]*$"
)
"""`Stamp`'s form (`harness_store.stamps._FORM`, its value stripped first), anchored."""

FUNCTION_SQL = f"""CREATE OR REPLACE FUNCTION {STAMP_FUNCTION}(stamp text) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    m text[] := regexp_match(stamp, '{_FORM}');
    y int; mo int; d int; h int; mi int; s int; us int;
    shift int := 0;
    utc timestamp;
BEGIN
    IF m IS NULL THEN
        RETURN NULL;
    END IF;
    y := m[1]; mo := m[2]; d := m[3];
    h := coalesce(m[4], '0'); mi := coalesce(m[5], '0'); s := coalesce(m[6], '0');
    us := rpad(left(coalesce(m[7], ''), 6), 6, '0');
    IF y < 1 OR mo NOT BETWEEN 1 AND 12 OR d NOT BETWEEN 1 AND 31
            OR h > 23 OR mi > 59 OR s > 59 THEN
        RETURN NULL;
    END IF;
    IF d > extract(day FROM make_date(y, mo, 1) + interval '1 month - 1 day') THEN
        RETURN NULL;
    END IF;
    IF m[8] IS NOT NULL AND m[8] NOT IN ('Z', 'z') THEN
        shift := substr(replace(m[8], ':', ''), 2, 2)::int * 60
            + substr(replace(m[8], ':', ''), 4, 2)::int;
        IF shift >= 1440 THEN
            RETURN NULL;
        END IF;
        IF left(m[8], 1) = '-' THEN
            shift := -shift;
        END IF;
    END IF;
    utc := make_timestamp(y, mo, d, h, mi, s)
        + us * interval '1 microsecond' - shift * interval '1 minute';
    IF utc NOT BETWEEN timestamp '0001-01-01 00:00:00'
            AND timestamp '9999-12-31 23:59:59.999999' THEN
        RETURN NULL;
    END IF;
    RETURN timezone('UTC', utc);
END
$$"""
"""`hs_stamp(text)`: the stamp's instant, or NULL (see the module's docstring). Each check
comes before what it guards, so no value reaches `make_date` or `make_timestamp` unless they
take it, and nothing raises. PL/pgSQL rather than SQL: the same parse as a SQL function
(one the planner cannot inline, since it matches the form once, in a subquery) took some 250
times as long a stamp, measured side by side."""

DROP_FUNCTION_SQL = f"DROP FUNCTION IF EXISTS {STAMP_FUNCTION}(text)"


def view_name(table: str) -> str:
    """The typed-times view of `table`."""
    return f"{table}{VIEW_SUFFIX}"


VIEWS = frozenset(view_name(t) for t in STAMP_COLUMNS)
"""Every view the chain may create (what `Store.check` and `copy` know as harness_store's)."""


def view_sql(table: str, columns: Collection[str]) -> list[str]:
    """The statements that (re)create `table`'s view over `columns` (those the table has at
    the revision that runs them), in the models' order."""
    stamps = set(STAMP_COLUMNS[table])
    ordered = [c.name for c in Base.metadata.tables[table].columns if c.name in columns]
    selected = [
        f'{STAMP_FUNCTION}("{name}") AS "{name}"' if name in stamps else f'"{name}"'
        for name in ordered
    ]
    selected += [
        f'{sql} AS "{name}"'
        for name, (needs, sql) in DERIVED.get(table, {}).items()
        if needs <= set(columns)
    ]
    name = view_name(table)
    return [
        f"DROP VIEW IF EXISTS {name}",
        f"CREATE VIEW {name} AS SELECT {', '.join(selected)} FROM {table}",
    ]


def create_sql(shape: Mapping[str, Collection[str]]) -> list[str]:
    """The function, then a view for each table of `shape` (table → its columns) that holds a
    stamp."""
    statements = [FUNCTION_SQL]
    for table in STAMP_COLUMNS:
        if table in shape and set(STAMP_COLUMNS[table]) & set(shape[table]):
            statements += view_sql(table, shape[table])
    return statements


def drop_sql() -> list[str]:
    """Every view, then the function (a view depends on it)."""
    return [f"DROP VIEW IF EXISTS {name}" for name in sorted(VIEWS)] + [DROP_FUNCTION_SQL]
