"""harness_store's own bookkeeping tables for sync: in the destination, who each origin is, how
its ids map to central ids and how far each append-only table has been read; in a source
marked with `--mark`, the origin's UUID.

They live in their own `MetaData`, outside the models' (so Alembic, `copy` and the Store never
treat them as io-harness tables), and `detect.IGNORED_TABLES` names them, so a store holding
them is still recognised as the io-harness store it is.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
)

SYNC_METADATA = MetaData()

ORIGINS = Table(
    "hs_sync_origins",
    SYNC_METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", Text, nullable=False, unique=True),
    Column("identity", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("device", BigInteger),
    Column("inode", BigInteger),
    Column("marked", Integer, nullable=False, server_default="0"),
    Column("anchor", Text),
    Column("first_synced_at", Text),
    Column("synced_at", Text),
    Column("syncs", Integer, nullable=False, server_default="0"),
    UniqueConstraint("identity", name="hs_sync_origins_identity"),
)
"""One row per source store: its UUID (the one written into a marked source, else made here),
how it is recognised (`identity`: `mark:<uuid>` or `file:<host>:<device>:<inode>`), where it
was last seen, and `anchor` — `<run id>:<started_at>` of its first run, which tells a new store
that reuses a deleted one's inode from the store that origin is."""

IDS = Table(
    "hs_sync_ids",
    SYNC_METADATA,
    Column("origin_id", Integer, primary_key=True, autoincrement=False),
    Column("tbl", Text, primary_key=True),
    Column("src_id", BigInteger, primary_key=True, autoincrement=False),
    Column("dest_id", BigInteger),
    Column("dest_sub", BigInteger),
    Column("hash", BigInteger),
    Index("hs_sync_ids_dest", "tbl", "dest_id"),
)
"""The id map of the rows sync keeps track of one by one (runs, sessions, turns and every
table upstream updates in place or deletes from): the source's key, the central row's key
(`dest_id`, plus `dest_sub` = the step for `step_turns`), and a 64-bit hash of the source row
as last sent. `dest_id` NULL: a memory entry another origin's newer entry shadows. A run
deleted in its source keeps its row with `hash` NULL, so links to it still resolve."""

MARKS = Table(
    "hs_sync_marks",
    SYNC_METADATA,
    Column("origin_id", Integer, primary_key=True, autoincrement=False),
    Column("tbl", Text, primary_key=True),
    Column("hwm", BigInteger, nullable=False),
)
"""Per origin and append-only table, the highest source id already sent."""

QUARANTINE = Table(
    "hs_sync_quarantine",
    SYNC_METADATA,
    Column("origin_id", Integer, primary_key=True, autoincrement=False),
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("tbl", Text, nullable=False),
    Column("row_key", Text),
    Column("col", Text),
    Column("problem", Text, nullable=False),
    Column("raw", LargeBinary, nullable=False),
    Column("first_seen", Text, nullable=False),
    Column("last_seen", Text, nullable=False),
)
"""Per origin, the runs a sync holds back because one of their rows holds a value the centre
cannot hold as it is (or because they wait for such a run: a child, a run whose rows link to
it). `run_id` is the run's id in the source; `tbl`, `row_key`, `col` and `problem` name the
first value found (`row_key` and `col` NULL for a run that only waits); `raw` is every row of
the run as the source holds it, byte-exact (`sync.quarantine.encode_rows`); `last_seen` when
a pass last wrote them (a pass that finds them unchanged writes nothing). A row is deleted by
the pass that sends its run whole, once its source is repaired."""

SOURCE_MARKER = Table(
    "hs_sync_origin",
    MetaData(),
    Column("uuid", Text, nullable=False),
)
"""The one table sync may write into a source, and only with `mark=True`: the origin's UUID."""


def recorded_path(path: str) -> str:
    """`path` in the form `ORIGINS.path` records an origin's path: absolute, a relative one
    taken from the current directory, as sync took it (unchanged when it cannot be resolved)."""
    try:
        return str(Path(path).resolve())
    except (OSError, ValueError):
        return path
