"""Finding out what a database is before anything touches it.

io-harness stores carry no version table: a store's release is known only from its shape
(tables, columns) and `user_version`. `diagnose` reads those without writing, and says what it
found in words a person can act on: "io-harness 0.5 store (torn open of 0.7: runs.status
present, checkpoint_events missing)". A shape is tables, columns, upstream's own indexes (by
name; harness_store's `hs_` indexes say nothing about a release) and `user_version`.
Everything here is read-only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from sqlalchemy import Connection, inspect

from ..dialects import backend_for
from ..dialects.read_only_files import WAL_SUFFIX, beside
from ..errors import (
    ForeignDatabaseError,
    NewerFormatError,
    NotADatabaseError,
    SchemaError,
    StoreAccessError,
    StoreNotFoundError,
    UpgradeRequiredError,
)
from ..formats import CHECKPOINT_FORMAT
from ..releases import (
    HEAD,
    INDEXES,
    NEWEST_KNOWN_RELEASE,
    RELEASE_NAMES,
    REVISIONS,
    SHAPES,
    STORE_RELEASE,
    UPSTREAM_HEAD,
    formats_at,
    release_of_revision,
)

IGNORED_TABLES = frozenset(
    {"sqlite_sequence", "sqlite_stat1", "sqlite_stat4", "alembic_version"}
    | {"hs_sync_origin", "hs_sync_origins", "hs_sync_ids", "hs_sync_marks", "hs_sync_quarantine"}
    | {"hs_spend_days", "hs_spend_runs", "hs_spend_priced_days", "hs_spend_priced_runs"}
    | {"hs_sync_roles", "hs_sync_origin_roles", "hs_sync_row_roles"}
    | {"hs_run_tokens", "hs_run_call_tokens"}
)
"""Tables that say nothing about which release wrote a store (the `hs_sync_` ones are sync's
bookkeeping, `harness_store.models.sync`; the `hs_spend_` ones hs3's spend counters,
`harness_store.models.spend`; `hs_run_tokens` hs6's token totals, `hs_run_call_tokens` hs7's)."""


class StoreKind(Enum):
    """What a database is, as far as harness_store is concerned."""

    EMPTY = "empty"
    """No tables: a fresh store is built through the whole chain."""
    TRACKED = "tracked"
    """Has `alembic_version`: Alembic already knows its revision."""
    UPSTREAM = "upstream"
    """An io-harness store of a known release, possibly torn, never seen by Alembic."""
    NEWER = "newer"
    """An io-harness store from a release newer than this package knows: the newest known
    shape plus tables or columns of its own."""


@dataclass(frozen=True)
class Diagnosis:
    """What `diagnose` found: the kind, the revision to stamp or already stamped, and why."""

    kind: StoreKind
    revision: str | None
    """The Alembic revision the store is at (stamped, or to be stamped); None = below 0.1."""
    release: str | None
    """The newest upstream release whose whole shape is present (None: not even 0.1)."""
    torn_of: str | None = None
    """The newest release whose shape is partly present, if the shape is between releases."""
    partial: tuple[str, ...] = ()
    """Every release after `release` whose shape is partly present (a torn open of a newer
    release runs some later releases' statements before earlier ones')."""
    present: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    """Tables and columns unknown to the newest known release (a newer one's), never altered."""
    user_version: int = 0
    tables: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Each user table's columns; empty for a tracked store diagnosed with `shape=False`."""

    @property
    def at_head(self) -> bool:
        """Whether the store is already at the chain's head revision."""
        return self.revision == HEAD

    @property
    def holds_upstream_head(self) -> bool:
        """Whether the whole 0.13 schema the Store, the CLI's reads and `copy` rely on is
        there: a store at 0.13 or any later revision (whole or torn above it), or a newer
        release's store."""
        if self.revision not in REVISIONS:
            return False
        return REVISIONS.index(self.revision) >= REVISIONS.index(STORE_RELEASE)

    def describe(self) -> str:
        """One line for a person: what this database is."""
        if self.kind is StoreKind.EMPTY:
            return "empty database (a fresh store will be created)"
        if self.kind is StoreKind.TRACKED:
            return f"harness_store-managed store at revision {self.revision}"
        if self.kind is StoreKind.NEWER:
            shown = ", ".join(self.extra[:6]) + (" …" if len(self.extra) > 6 else "")
            return (
                f"io-harness store newer than {NEWEST_KNOWN_RELEASE} (has {shown}); "
                f"its {UPSTREAM_HEAD} schema is complete"
            )
        base = f"io-harness {self.release} store" if self.release else "io-harness store"
        if self.torn_of:
            detail = []
            if self.present:
                detail.append(_listed(self.present) + " present")
            if self.missing:
                detail.append(_listed(self.missing) + " missing")
            also = [r for r in self.partial if r != self.torn_of]
            partly = f"; {', '.join(also)} partly present too" if also else ""
            return f"{base} (torn open of {self.torn_of}: {'; '.join(detail)}{partly})"
        return base


def refuse_unreadable(found: Diagnosis, shown: str, upgrade_command: str) -> None:
    """The one decision whether a store can be read without an upgrade (the read commands,
    a read-only `Store.open`, a sync source): an empty database is no run store
    (`NotADatabaseError`); a store without the whole 0.13 schema raises
    `UpgradeRequiredError` naming `upgrade_command` (a shell command, ready to paste).
    `shown` is how the store is named (its path, or its URL without the password)."""
    if found.kind is StoreKind.EMPTY:
        raise NotADatabaseError(f"{shown} is an empty database (no tables), not a run store")
    if not found.holds_upstream_head:
        raise UpgradeRequiredError(
            f"{shown}: {found.describe()}; reading it needs the {STORE_RELEASE} schema "
            f"— run {upgrade_command} first (nothing was changed)"
        )


def read_tables(conn: Connection) -> dict[str, frozenset[str]]:
    """Every user table and its columns, without writing anything."""
    return {
        name: columns
        for name, columns in backend_for(conn).table_columns(conn).items()
        if name not in IGNORED_TABLES and not name.startswith("sqlite_")
    }


def read_indexes(conn: Connection, tables: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The names of upstream's own indexes the store has (any release's), without writing."""
    known = INDEXES[RELEASE_NAMES[-1]]
    return frozenset(backend_for(conn).index_names(conn, tables) & set(known))


def _listed(items: tuple[str, ...], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" … ({len(items) - limit} more)" if len(items) > limit else "")


def read_revision(conn: Connection) -> str | None:
    """The revision in `alembic_version`, or None when the table is absent or empty."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
    if len(rows) > 1:
        raise SchemaError(f"alembic_version holds several revisions {rows}; expected one")
    return str(rows[0]) if rows else None


def shape_items(shape: Mapping[str, frozenset[str]]) -> set[str]:
    """A shape as a flat set of 'table' and 'table.column' items."""
    items: set[str] = set()
    for table, columns in shape.items():
        items.add(table)
        items.update(f"{table}.{c}" for c in columns)
    return items


def _release_items(name: str) -> set[str]:
    items = shape_items(SHAPES[name])
    items.update(f"index {index}" for index in INDEXES[name])
    if formats_at(name):
        items.add(f"user_version {CHECKPOINT_FORMAT}")
    return items


def _delta_items(name: str) -> set[str]:
    """What release `name` itself added to the release before it."""
    index = RELEASE_NAMES.index(name)
    return _release_items(name) - (_release_items(RELEASE_NAMES[index - 1]) if index else set())


def diagnose(
    conn: Connection, *, refuse_newer_format: bool = True, shape: bool = True
) -> Diagnosis:
    """Say what the database behind `conn` is; raise a `SchemaError` for one it must refuse.

    Refused, with nothing written: a database whose tables are not an io-harness store, and
    — unless `refuse_newer_format` is false (reading, as upstream reads it) — a newer
    checkpoint format (`user_version` above 7), which must not be upgraded.

    A store Alembic tracks is known by its `alembic_version` alone; its tables and columns
    (`Diagnosis.tables`) are read only when `shape` is true — `inspect` shows them and `copy`
    copies them, while an upgrade, which only needs the revision, skips reading 37 tables.
    """
    backend = backend_for(conn)
    user_version = backend.checkpoint_format(conn)
    if user_version > CHECKPOINT_FORMAT and refuse_newer_format:
        raise NewerFormatError(
            f"checkpoint format {user_version} is newer than {CHECKPOINT_FORMAT}, the newest "
            "harness_store understands; it was written by a newer io-harness — upgrade "
            "harness_store instead of opening it with this one"
        )
    revision = read_revision(conn)
    if revision is not None:
        if revision not in REVISIONS:
            raise SchemaError(
                f"alembic_version says {revision!r}, which is not a harness_store revision "
                f"({', '.join(REVISIONS)})"
            )
        return Diagnosis(
            StoreKind.TRACKED,
            revision,
            release_of_revision(revision),
            user_version=user_version,
            tables=read_tables(conn) if shape else {},
        )
    tables = read_tables(conn)
    if not tables:
        return Diagnosis(StoreKind.EMPTY, None, None, user_version=user_version, tables=tables)

    have = shape_items(tables)
    have.update(f"index {index}" for index in read_indexes(conn, tables))
    if user_version >= CHECKPOINT_FORMAT:
        have.add(f"user_version {CHECKPOINT_FORMAT}")
    known = _release_items(UPSTREAM_HEAD)
    extra = tuple(_order(have - known))
    if "runs" not in tables or not {"runs.goal", "runs.file"} <= have:
        raise ForeignDatabaseError(
            "this database has tables (" + ", ".join(sorted(tables)) + ") but is not an "
            "io-harness run store; nothing was changed"
        )
    if extra:
        if known <= have:
            return Diagnosis(
                StoreKind.NEWER,
                UPSTREAM_HEAD,
                UPSTREAM_HEAD,
                extra=extra,
                user_version=user_version,
                tables=tables,
            )
        raise ForeignDatabaseError(
            "this database looks like an io-harness store but also has "
            + ", ".join(extra)
            + f" without the whole {UPSTREAM_HEAD} schema; it is not a shape any io-harness "
            "release leaves, so it was not touched"
        )

    whole = [name for name in RELEASE_NAMES if _release_items(name) <= have]
    newest = whole[-1] if whole else None
    base_items = _release_items(newest) if newest else set()
    beyond = have - base_items
    if not beyond:
        return Diagnosis(
            StoreKind.UPSTREAM, newest, newest, user_version=user_version, tables=tables
        )
    start = RELEASE_NAMES.index(newest) + 1 if newest else 0
    partial = tuple(n for n in RELEASE_NAMES[start:] if _delta_items(n) & beyond)
    torn_of = partial[-1]
    wanted = _release_items(torn_of) - base_items
    present = tuple(_order(wanted & have))
    missing = tuple(_order(wanted - have))
    return Diagnosis(
        StoreKind.UPSTREAM,
        newest,
        newest,
        torn_of=torn_of,
        partial=partial,
        present=present,
        missing=missing,
        user_version=user_version,
        tables=tables,
    )


def _order(items: set[str]) -> list[str]:
    """Tables before their columns, otherwise alphabetical, with a table's columns folded in."""
    tables = {i for i in items if "." not in i and not i.startswith(("user_version", "index "))}
    shown = sorted(tables) + sorted(
        i for i in items if i not in tables and i.split(".")[0] not in tables
    )
    return shown


SQLITE_HEADER = b"SQLite format 3\x00"


def special_kind(mode: int) -> str:
    """What a path that is no regular file is, for a person: "a FIFO (named pipe)", …"""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_sqlite_file(path: Path, *, writable: bool = True, missing: str | None = None) -> None:
    """Refuse, before SQLite touches it, a path that cannot be a run store: the one check of
    a store file every opener makes (`Store.open`, the read-only open, the upgrade, sync's
    sources, the command's copy).

    A directory, a FIFO, socket or device, a file that is not SQLite, and a truncated store raise
    `NotADatabaseError` (a 0-byte file passes: it is an empty database); when `writable`, a
    file without write permission raises `StoreAccessError`. The file is only read. A
    missing path raises `StoreNotFoundError` ("no run store at PATH", then `missing`) when
    `missing` is given; else it passes: creating a store there is the caller's decision.
    """
    if not path.exists():
        if missing is not None:
            raise StoreNotFoundError(f"no run store at {path}{missing}")
        return
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        raise NotADatabaseError(f"{path} is a directory, not a run store")
    if not stat.S_ISREG(mode):
        # Opening a FIFO to read its header would wait for a writer forever.
        raise NotADatabaseError(f"{path} is {special_kind(mode)}, not a run store")
    size = path.stat().st_size
    if size == 0:
        return  # an empty database, as SQLite, Alembic and upstream see it: nothing to protect
    with path.open("rb") as handle:
        header = handle.read(100)
    if not header.startswith(SQLITE_HEADER):
        raise NotADatabaseError(f"{path} is not a SQLite database (wrong file header)")
    if len(header) < 100:
        raise NotADatabaseError(f"{path} is a truncated SQLite database ({size} bytes)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96]
    wal = beside(path, WAL_SUFFIX)
    if header_valid and pages and size < pages * page_size and not wal.exists():
        raise NotADatabaseError(
            f"{path} is a truncated SQLite database: {size} bytes, but its header "
            f"says {pages} pages of {page_size} bytes"
        )
    if writable and not writable_file(path):
        raise read_only_store(path)


def read_only_store(path: Path) -> StoreAccessError:
    """The refusal of a store file that cannot be written, where it must be."""
    return StoreAccessError(f"{path} is read-only; a run store must be writable")


def writable_file(path: Path) -> bool:
    """Whether the file at `path` may be written: its permission bits say so (for root too,
    whom `os.access` always lets write) and the process may."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)
