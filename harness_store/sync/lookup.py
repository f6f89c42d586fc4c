"""Questions the destination's id maps answer: which origins there are, which central run is
run N of an origin's store, and which origin and source run a central run came from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, func, inspect, or_, select
from sqlalchemy.engine import URL

from ..engine import to_url
from ..models.sync import IDS, ORIGINS, QUARANTINE, recorded_path
from ..store.base import StoreBase
from ..store.check_quarantine import QuarantinedRun, read_quarantine

Target = str | os.PathLike[str] | URL | StoreBase
"""A destination store: a path or URL (opened read-only for the question), or a Store."""


@dataclass(frozen=True)
class OriginInfo:
    """An origin as the destination records it."""

    uuid: str
    host: str
    path: str
    marked: bool
    first_synced_at: str | None
    synced_at: str | None
    syncs: int
    runs: int
    """Runs of this origin held centrally (runs its source deleted excluded)."""


@contextmanager
def _reading(dest: Target) -> Iterator[Connection]:
    """One read transaction on `dest`: a Store already open, or one opened read-only for
    the read (the one read-only open, which does not refuse an older or empty store)."""
    from ..store import Store, open_read_only, read_snapshot

    if isinstance(dest, StoreBase):
        with read_snapshot(dest) as conn:
            yield conn
        return
    store, _ = open_read_only(Store, to_url(dest), refuse=False)
    with store, read_snapshot(store) as conn:
        yield conn


def _has_sync_tables(conn: Connection) -> bool:
    return inspect(conn).has_table(ORIGINS.name)


def _origin_id(conn: Connection, origin: str) -> int | None:
    """An origin by UUID (or a unique prefix of it), host:path, or path (relative or not)."""
    row = conn.execute(
        select(ORIGINS.c.id).where(
            or_(
                ORIGINS.c.uuid == origin,
                ORIGINS.c.path == origin,
                ORIGINS.c.path == recorded_path(origin),
                (ORIGINS.c.host + ":" + ORIGINS.c.path) == origin,
            )
        )
    ).first()
    if row is None and len(origin) >= 4:
        rows = conn.execute(
            select(ORIGINS.c.id).where(ORIGINS.c.uuid.startswith(origin, autoescape=True))
        ).all()
        row = rows[0] if len(rows) == 1 else None
    return int(row[0]) if row is not None else None


def list_origins(dest: Target) -> list[OriginInfo]:
    """Every origin synced into `dest`, oldest first (none when nothing was synced there)."""
    with _reading(dest) as conn:
        if not _has_sync_tables(conn):
            return []
        runs = (
            select(IDS.c.origin_id, func.count().label("n"))
            .where(IDS.c.tbl == "runs", IDS.c.hash.is_not(None))
            .group_by(IDS.c.origin_id)
            .subquery()
        )
        rows = conn.execute(
            select(ORIGINS, func.coalesce(runs.c.n, 0))
            .outerjoin(runs, runs.c.origin_id == ORIGINS.c.id)
            .order_by(ORIGINS.c.id)
        ).all()
    return [
        OriginInfo(
            uuid=r.uuid,
            host=r.host,
            path=r.path,
            marked=bool(r.marked),
            first_synced_at=r.first_synced_at,
            synced_at=r.synced_at,
            syncs=int(r.syncs),
            runs=int(r[-1]),
        )
        for r in rows
    ]


def central_run(dest: Target, origin: str, source_run_id: int) -> int | None:
    """The central id of run `source_run_id` of `origin`'s store (None: not synced)."""
    with _reading(dest) as conn:
        if not _has_sync_tables(conn) or (oid := _origin_id(conn, origin)) is None:
            return None
        value = conn.execute(
            select(IDS.c.dest_id).where(
                IDS.c.origin_id == oid, IDS.c.tbl == "runs", IDS.c.src_id == source_run_id
            )
        ).scalar()
    return int(value) if value is not None else None


def source_run(dest: Target, central_run_id: int) -> tuple[str, int] | None:
    """The origin UUID and source run id a central run came from (None: not from a sync)."""
    with _reading(dest) as conn:
        if not _has_sync_tables(conn):
            return None
        row = conn.execute(
            select(ORIGINS.c.uuid, IDS.c.src_id)
            .join(ORIGINS, ORIGINS.c.id == IDS.c.origin_id)
            .where(IDS.c.tbl == "runs", IDS.c.dest_id == central_run_id)
        ).first()
    return (str(row[0]), int(row[1])) if row is not None else None


def origin_runs(dest: Target, origin: str) -> list[int] | None:
    """The central ids of every run `origin` sent (None: no such origin)."""
    with _reading(dest) as conn:
        if not _has_sync_tables(conn) or (oid := _origin_id(conn, origin)) is None:
            return None
        ids = conn.execute(
            select(IDS.c.dest_id)
            .where(IDS.c.origin_id == oid, IDS.c.tbl == "runs", IDS.c.hash.is_not(None))
            .order_by(IDS.c.dest_id)
        ).scalars()
        return [int(i) for i in ids]


def has_origin(dest: Target, origin: str) -> bool:
    """Whether `origin` (a UUID or the path it was synced from) is an origin of `dest`."""
    return any(
        origin in (o.uuid, o.path) or recorded_path(origin) == o.path for o in list_origins(dest)
    )


def quarantined(dest: Target) -> list[QuarantinedRun]:
    """Every run the centre `dest` holds in quarantine (a value it cannot hold as it is, or
    waiting for such a run), by origin and source run id; none when nothing is held."""
    with _reading(dest) as conn:
        if not inspect(conn).has_table(QUARANTINE.name):
            return []
        return read_quarantine(conn)
