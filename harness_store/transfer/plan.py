"""The source of a copy: what it holds, checked and counted up front in its snapshot."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, Connection, Table, func, select
from sqlalchemy import table as table_clause
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from ..connector import Connector, connector_at
from ..connector.translation import driver_message
from ..dialects import backend_named
from ..dialects.base import FORMAT_TABLE
from ..engine import URL_ENV, safe_url, sqlite_path, where
from ..errors import SchemaError, StoreError, UpgradeRequiredError
from ..releases import NEWEST_KNOWN_RELEASE, SHAPES, STORE_RELEASE
from ..schema.detect import Diagnosis, StoreKind, read_tables
from .report import UnknownTablesError

if TYPE_CHECKING:
    from sqlalchemy import MetaData

BOOKKEEPING_TABLES = frozenset({"alembic_version", FORMAT_TABLE})
"""Tables the chain itself writes on the target; never counted as skipped data."""


@dataclass(frozen=True)
class Plan:
    """What the source holds, read in its snapshot before any row moves."""

    tables: tuple[Table, ...]
    columns: dict[str, list[Column[Any]]]
    """Per table, the columns the source has (a source of an older release lacks later ones)."""
    counts: dict[str, int]
    skipped_tables: dict[str, int]
    skipped_columns: tuple[str, ...]
    checkpoint_format: int


def models_metadata() -> MetaData:
    """The models' tables: what a copy knows how to carry (imported when a copy runs)."""
    from ..models import Base

    return Base.metadata


@contextmanager
def opened(url: URL) -> Iterator[Connector]:
    """A connector of its own for the target at `url`, with a failure to open it said in
    terms of the store."""
    with ExitStack() as stack:
        try:
            connector = stack.enter_context(connector_at(url))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot open {where(url)}: {driver_message(exc)}") from exc
        yield connector


def copied_tables(have: Mapping[str, frozenset[str]]) -> tuple[Table, ...]:
    """The tables a copy carries, in foreign-key order: every model's the source has."""
    return tuple(t for t in models_metadata().sorted_tables if t.name in have)


def copied_columns(table: Table, have: Mapping[str, frozenset[str]]) -> list[Column[Any]]:
    """The columns of `table` a copy carries: the model's the source has."""
    return [c for c in table.columns if c.name in have.get(table.name, ())]


def count(conn: Connection, name: str) -> int:
    """The rows of table `name`."""
    return int(conn.execute(select(func.count()).select_from(table_clause(name))).scalar_one())


def make_plan(src: Connection, found: Diagnosis, url: URL) -> Plan:
    """Check the source holds the whole 0.13 schema, and read its counts and marker in its
    snapshot `src`; `found` is what the read-only open found it to be (foreign stores and
    newer checkpoint formats were refused there)."""
    shown = where(url)
    if found.kind is StoreKind.EMPTY:
        raise SchemaError(f"{shown} holds no run store (it has no tables); nothing to copy")
    have = read_tables(src)
    tables = copied_tables(have)
    needed = SHAPES[STORE_RELEASE]
    missing = [t for t in needed if t not in have] + [
        f"{t}.{c}" for t in needed if t in have for c in sorted(needed[t]) if c not in have[t]
    ]
    if missing:
        raise UpgradeRequiredError(
            f"{shown}: {found.describe()}; a copy needs the io-harness {STORE_RELEASE} schema "
            f"(revision {STORE_RELEASE} or later), and it lacks {', '.join(missing)}. "
            "A copy never changes its source: upgrade it first with "
            f"`harness-store upgrade {pasteable(url)}`, then copy it"
        )
    skipped_columns = tuple(
        f"{t.name}.{name}" for t in tables for name in sorted(have[t.name] - set(t.columns.keys()))
    )
    known = models_metadata().tables
    skipped_tables = {
        name: count(src, name)
        for name in sorted(have)
        if name not in known and name not in BOOKKEEPING_TABLES
    }
    return Plan(
        tables=tables,
        columns={t.name: copied_columns(t, have) for t in tables},
        counts={t.name: count(src, t.name) for t in tables},
        skipped_tables=skipped_tables,
        skipped_columns=skipped_columns,
        checkpoint_format=backend_named(src.dialect.name).checkpoint_format(src),
    )


def pasteable(url: URL) -> str:
    """The store as a shell argument for a suggested command: a quoted path or URL, or
    `"$HARNESS_STORE_URL"` for a URL whose password must not be printed."""
    path = sqlite_path(url)
    if path is not None:
        return shlex.quote(str(path))
    return f'"${URL_ENV}"' if url.password else shlex.quote(safe_url(url))


def refuse_unknown(plan: Plan, url: URL) -> None:
    """Refuse a source whose tables or columns from a newer io-harness a copy would leave behind."""
    left = [f"{name} ({n} rows)" for name, n in plan.skipped_tables.items()]
    left += list(plan.skipped_columns)
    if left:
        raise UnknownTablesError(
            f"{where(url)} has tables or columns of an io-harness newer than "
            f"{NEWEST_KNOWN_RELEASE}, which a copy cannot carry: {', '.join(left)}. "
            "Nothing was changed; copy with --skip-unknown-tables to leave them out"
        )
