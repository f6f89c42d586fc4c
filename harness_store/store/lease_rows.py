"""A run's lease row as io-harness reads it (0.62): its expiry computed on the database's
clock, and who holds it now — read by the lease calls and, for the error it raises, by a
checkpoint whose lease was taken over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, literal_column, select

from .. import models as m
from ..dialects import Backend
from ..errors import InvalidValueError, LeaseConflictError, UnreadableValueError
from ..formats import I64_MAX
from ..records import LeaseRow
from ..stamps import Stamp

LAST_STAMP = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
"""The last time a stamp can hold: io-harness's SQL (`strftime`) computes NULL past the year
9999, and Python's `datetime` ends there too."""

LATEST_EXPIRY = datetime(9999, 1, 1, tzinfo=UTC)
"""A lease the Store takes must lapse before this: the year left before `LAST_STAMP` is room
for its renewals and for the database's clock to differ from this process's."""


def lease_ttl(ttl_secs: int) -> int:
    """`ttl_secs` when a lease taken now with it can be read back, else `InvalidValueError`:
    its expiry (`renewed_at + ttl_secs`) must fall before `LATEST_EXPIRY`, and it must not be
    negative (io-harness's `'+' || ttl_secs || ' seconds'` is then no modifier: no expiry)."""
    longest = int((LATEST_EXPIRY - datetime.now(UTC)).total_seconds())
    if 0 <= ttl_secs <= longest:
        return ttl_secs
    raise InvalidValueError(
        f"acquire_lease: ttl_secs must be from 0 to {longest}, not {ttl_secs}: the lease's "
        "expiry (now + ttl_secs) must fall before the year 9999, which io-harness's SQL can "
        "write (nothing was written)"
    )


def _stamp(value: object, run_id: int, column: str) -> datetime:
    """A stored `%Y-%m-%dT%H:%M:%fZ` (or `YYYY-MM-DD HH:MM:SS`) stamp as a UTC datetime. Any
    other value is refused typed, as io-harness's own read of the row fails (its SQL's
    `strftime` of it is NULL, which its row type does not take)."""
    found = stamp(value) if isinstance(value, str) else None
    if found is not None:
        return found
    raise _unreadable(run_id, column, f"is {value!r}, not a time stamp")


def _unreadable(run_id: int, column: str, what: str) -> UnreadableValueError:
    return UnreadableValueError(
        f"the lease of run {run_id} cannot be read: run_leases row run_id {run_id}: its "
        f"{column} {what} (`harness-store check` names it; io-harness's own read of it fails "
        "too)"
    )


def expiry_fault(renewed: datetime, ttl: int) -> str | None:
    """Why io-harness computes no expiry (`renewed_at + ttl_secs`) for a lease, or None when
    it does: a negative ttl is no `'+N seconds'`, and no stamp is past `LAST_STAMP`."""
    if ttl < 0:
        return f"is {ttl}: a negative ttl gives no expiry"
    if ttl > (LAST_STAMP - renewed).total_seconds():
        return f"is {ttl}: the expiry, renewed_at + ttl_secs, is past the year 9999"
    return None


def stamp(value: str) -> datetime | None:
    """A stored stamp as a UTC datetime, or None when it is none."""
    found = Stamp.read(value)
    return None if found is None else found.instant


def _expiry(renewed: datetime, ttl: int, run_id: int) -> datetime:
    """`renewed + ttl` seconds, or `UnreadableValueError` where io-harness computes none."""
    fault = expiry_fault(renewed, ttl)
    if fault is not None:
        raise _unreadable(run_id, "ttl_secs", fault)
    return renewed + timedelta(seconds=ttl)


def check_take_over(held: LeaseRow) -> None:
    """`UnreadableValueError` when a take-over cannot raise `held`'s generation by one: at
    2⁶³−1 SQLite would write a REAL no read takes, and PostgreSQL refuses the sum."""
    if held.generation >= I64_MAX:
        raise UnreadableValueError(
            f"the lease of run {held.run_id} cannot be taken over: run_leases row run_id "
            f"{held.run_id}: its generation is {held.generation}, the largest integer, which a "
            "take-over cannot raise (`harness-store check` names it; nothing was written)"
        )


def _format(moment: datetime) -> str:
    return Stamp(moment).text


def lease_row(run_id: int, row: Any, now: str) -> LeaseRow:
    """A lease row with its expiry, computed as upstream's SQL does on the database's clock:
    `expires_at` is `renewed_at + ttl_secs`, and it has lapsed once whole seconds now less
    whole seconds at renewal reach the ttl."""
    owner, generation, acquired_at, renewed_at, ttl = row
    for column, value in (("generation", generation), ("ttl_secs", ttl)):
        if not isinstance(value, int):
            raise _unreadable(run_id, column, f"is {value!r}, not an integer")
    renewed = _stamp(renewed_at, run_id, "renewed_at")
    expires_at = _format(_expiry(renewed, ttl, run_id))
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
