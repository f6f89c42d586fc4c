"""What each column of the newest release's tables is in Arrow: upstream's types restored.

The database keeps upstream's Rust types in SQLite's few storage classes — stamps as text,
booleans as 0/1, `u64` counts as INTEGER (some of them wrapped into `i64` by an `as i64` cast),
JSON as text. Each column here gets a `Kind` saying how its stored value is read back (the
counts as the signed 64-bit integers the store keeps, the analytic convention), and some
JSON columns whose shape upstream fixes get parsed columns beside them (`Parsed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import pyarrow as pa
from sqlalchemy import Table, Text

from ..errors import InvalidValueError
from ..models import UPSTREAM_TABLES, Base
from ..models.spend import USAGE_SUMS
from ..sync.rules import RULE_OF
from .tool_calls import TOOL_CALLS


class Kind(Enum):
    """How a stored column is read back."""

    INT = "int"
    """A signed integer (ids, step numbers, depths): `int64`."""
    U64 = "u64"
    """Upstream's `u64`, stored as is (at most 2⁶³ − 1 by upstream's own check): `int64`,
    exact, so that a difference of two counts is a signed number in every reader."""
    WRAPPED_U64 = "wrapped_u64"
    """Upstream's `u64` written with a wrapping `as i64` cast: `int64`, the value the store
    holds (a value of 2⁶³ or more, which upstream wrapped, is negative; a cast to `uint64`
    reads it as upstream does)."""
    BOOL = "bool"
    """Upstream's `bool`, stored as INTEGER 0/1: `bool`."""
    STAMP = "stamp"
    """A UTC time stamp stored as text (`%Y-%m-%dT%H:%M:%fZ`, or `YYYY-MM-DD HH:MM:SS` in the
    tables that use SQLite's `datetime('now')`): `timestamp[us, UTC]`."""
    TEXT = "text"
    """Text, JSON text included: `string`."""


ARROW_TYPES: dict[Kind, pa.DataType] = {
    Kind.INT: pa.int64(),
    Kind.U64: pa.int64(),
    Kind.WRAPPED_U64: pa.int64(),
    Kind.BOOL: pa.bool_(),
    Kind.STAMP: pa.timestamp("us", tz="UTC"),
    Kind.TEXT: pa.string(),
}

BOOLEANS = {
    ("mcp_events", "ok"),
    ("memory", "pinned"),
    ("run_outcomes", "success"),
    ("pending_questions", "resolved"),
    ("plans", "resolved"),
}
"""Upstream's `bool` fields."""

WRAPPED = {
    ("mcp_events", "millis"),
    ("context_events", "est_tokens"),
    ("context_events", "reported_tokens"),
}
"""Upstream's `u64` fields it writes with a wrapping `as i64` cast (`formats.wrapped_u64`)."""

UNSIGNED = {
    ("steps", "tokens"),
    ("run_outcomes", "tokens"),
    *(("provider_calls", name) for name in (*USAGE_SUMS, "latency_ms", "ttft_ms")),
    ("agent_events", "tokens"),
    ("agent_events", "remaining"),
    ("edits", "lines_added"),
    ("edits", "lines_removed"),
    ("summaries", "est_tokens"),
    ("process_handles", "handle"),
    ("handle_output", "handle"),
}
"""Upstream's `u64` fields stored as they are (`formats.u64`)."""


@dataclass(frozen=True)
class Parsed:
    """A column parsed out of a JSON (or `name:{args} | name:{args}`) text column of fixed
    shape."""

    name: str
    source: str
    type: pa.DataType
    doc: str


PLAN_STEP = pa.struct([("intent", pa.string()), ("agent", pa.string())])
POLICY_DEFAULTS = pa.struct([(act, pa.string()) for act in ("read", "write", "exec", "net")])

PARSED: dict[str, tuple[Parsed, ...]] = {
    "steps": (
        Parsed("tool", "tool_call", pa.string(), "the tool of the step's first call"),
        Parsed("tool_args", "tool_call", pa.string(), "its arguments, JSON text"),
        Parsed("tool_calls", "tool_call", TOOL_CALLS, "every call: its name and arguments"),
    ),
    "step_turns": (
        Parsed("call_names", "calls", pa.list_(pa.string()), "the names of the turn's calls"),
    ),
    "spawns": (
        Parsed("deny_write_globs", "deny_write", pa.list_(pa.string()), "the globs, parsed"),
    ),
    "pending_questions": (
        Parsed("choice_list", "choices", pa.list_(pa.string()), "the choices, parsed"),
    ),
    "plans": (Parsed("plan_steps", "steps", pa.list_(PLAN_STEP), "the plan's steps, parsed"),),
    "run_policies": (
        Parsed("policy_defaults", "policy", POLICY_DEFAULTS, "the verdict of each act by default"),
        Parsed("policy_layers", "policy", pa.list_(pa.string()), "the names of its layers"),
    ),
}
"""The parsed columns of each table, placed after the columns they come from."""

ORIGIN = "origin"
"""The column naming the origin (the UUID sync gave the source store) of a synced row."""


@dataclass(frozen=True)
class TableShape:
    """One table as Arrow sees it."""

    name: str
    table: Table
    kinds: dict[str, Kind]
    parsed: tuple[Parsed, ...]
    run_column: str | None
    """The column naming the run a row belongs to (`runs`: its `id`; None: not run-scoped)."""
    stamp_column: str | None
    """The row's own stamp, which `since` filters on (None: filter on its run's start)."""
    key: tuple[str, ...]
    """The primary key, the order rows are read in."""
    append_only: bool
    """Rows are only ever inserted, with ids never reused (new rows are those above the
    highest id seen); otherwise rows change in place or are deleted."""

    def schema(self, columns: list[str] | None = None, *, origin: bool = False) -> pa.Schema:
        """The Arrow schema of `columns` (stored or parsed; all by default), with `origin`
        last when asked for."""
        fields = [field for field in self.all_fields() if columns is None or field.name in columns]
        if origin:
            fields.append(pa.field(ORIGIN, pa.string()))
        return pa.schema(fields)

    def all_fields(self) -> list[pa.Field[Any]]:
        fields = []
        for name, kind in self.kinds.items():
            # Nullable throughout: an older SQLite store can hold NULL where the schema
            # later said NOT NULL, and a read never refuses a row the store holds.
            fields.append(pa.field(name, ARROW_TYPES[kind]))
            fields.extend(pa.field(p.name, p.type) for p in self.parsed if p.source == name)
        return fields

    def stored_columns(self, columns: list[str] | None) -> list[str]:
        """The stored columns to read for `columns` (a parsed one needs its source)."""
        if columns is None:
            return list(self.kinds)
        known = {*self.kinds, *(p.name for p in self.parsed), ORIGIN}
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise InvalidValueError(f"{self.name} has no column {', '.join(map(repr, unknown))}")
        sources = {p.source for p in self.parsed if p.name in columns}
        return [c for c in self.kinds if c in columns or c in sources]


def _kind(table: str, column: str, is_text: bool) -> Kind:
    if is_text:
        return Kind.STAMP if column == "at" or column.endswith("_at") else Kind.TEXT
    if (table, column) in BOOLEANS:
        return Kind.BOOL
    if (table, column) in WRAPPED:
        return Kind.WRAPPED_U64
    if (table, column) in UNSIGNED:
        return Kind.U64
    return Kind.INT


def _shape(name: str) -> TableShape:
    table = Base.metadata.tables[name]
    kinds = {c.name: _kind(name, c.name, isinstance(c.type, Text)) for c in table.columns}
    rule = RULE_OF[name]
    run_column = "id" if name == "runs" else rule.run_column
    stamps = [c for c, k in kinds.items() if k is Kind.STAMP]
    key = tuple(c.name for c in table.primary_key.columns)
    return TableShape(
        name=name,
        table=table,
        kinds=kinds,
        parsed=PARSED.get(name, ()),
        run_column=run_column,
        stamp_column=stamps[0] if stamps else None,
        key=key,
        append_only=rule.kind == "append",
    )


SHAPES: dict[str, TableShape] = {name: _shape(name) for name in UPSTREAM_TABLES}
"""Every table of the newest release, in the order releases added them."""

TABLES: tuple[str, ...] = UPSTREAM_TABLES


def shape_of(table: str) -> TableShape:
    """The shape of `table`, or `InvalidValueError` naming the tables there are."""
    try:
        return SHAPES[table]
    except KeyError:
        raise InvalidValueError(
            f"no table {table!r} in the store; tables: {', '.join(TABLES)}"
        ) from None
