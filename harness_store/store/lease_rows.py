"""A run's lease row as io-harness reads it (0.62): its expiry computed on the database's
clock, and who holds it now — read by the lease calls and, for the error it raises, by a
checkpoint whose lease was taken over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, literal_column, select

from .. import models as m
from ..dialects import Backend
from ..errors import LeaseConflictError, UnreadableValueError
from ..records import LeaseRow


def _stamp(value: object, run_id: int, column: str) -> datetime:
    """A stored `%Y-%m-%dT%H:%M:%fZ` (or `YYYY-MM-DD HH:MM:SS`) stamp as a UTC datetime. Any
    other value is refused typed, as io-harness's own read of the row fails (its SQL's
    `strftime` of it is NULL, which its row type does not take)."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.rstrip("Z").replace("T", " ")).replace(tzinfo=UTC)
        except ValueError:
            pass
    raise UnreadableValueError(
        f"the lease of run {run_id} cannot be read: its {column} is {value!r}, not a time "
        "stamp (`harness-store check` names it; io-harness's own read of it fails too)"
    )


def _format(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def lease_row(run_id: int, row: Any, now: str) -> LeaseRow:
    """A lease row with its expiry, computed as upstream's SQL does on the database's clock:
    `expires_at` is `renewed_at + ttl_secs`, and it has lapsed once whole seconds now less
    whole seconds at renewal reach the ttl."""
    owner, generation, acquired_at, renewed_at, ttl = row
    for column, value in (("generation", generation), ("ttl_secs", ttl)):
        if not isinstance(value, int):
            raise UnreadableValueError(
                f"the lease of run {run_id} cannot be read: its {column} is {value!r}, not an "
                "integer (`harness-store check` names it; io-harness's own read of it fails too)"
            )
    renewed = _stamp(renewed_at, run_id, "renewed_at")
    expires_at = _format(renewed + timedelta(seconds=int(ttl)))
    elapsed = int(_stamp(now, run_id, "clock").timestamp()) - int(renewed.timestamp())
    return LeaseRow(
        run_id,
        owner,
        int(generation),
        acquired_at,
        renewed_at,
        expires_at,
        int(ttl),
        elapsed >= int(ttl),
    )


def read_lease(
    conn: Connection, backend: Backend, run_id: int, *, lock: bool = False
) -> LeaseRow | None:
    """A run's lease row, read in `conn` on the database's clock (locked with `lock`)."""
    r = m.RunLease
    statement: Any = select(
        r.owner,
        r.generation,
        r.acquired_at,
        r.renewed_at,
        r.ttl_secs,
        literal_column(backend.now()),
    ).where(r.run_id == run_id)
    if lock:
        statement = statement.with_for_update()
    row = conn.execute(statement).first()
    return None if row is None else lease_row(run_id, row[:5], row[5])


def lease_conflict(conn: Connection, backend: Backend, run_id: int) -> LeaseConflictError:
    """The error for a lease this handle no longer holds, naming who holds it now."""
    row = read_lease(conn, backend, run_id)
    if row is None:
        return LeaseConflictError(run_id, "", "")
    return LeaseConflictError(run_id, row.owner, row.expires_at)
