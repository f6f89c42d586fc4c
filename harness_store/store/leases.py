"""Who drives a run (io-harness 0.62): one lease per run, with an owner, a generation raised on
every take-over, and a time to live. A Store handle is one owner; a handle holding a run's
lease checkpoints that run only while it still holds it, checked inside the checkpoint's own
transaction so a driver taken over mid-step writes nothing."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from sqlalchemy import Connection, delete, insert, literal_column, select, text, update

from .. import models as m
from ..dialects import Backend
from ..errors import LeaseConflictError, RunNotFoundError, StoreError, UnreadableValueError
from ..formats import i64
from ..records import LeaseRow
from .checkpoints import new_owner_id as new_owner_id
from .marks import local, reads, writes
from .older import OlderStoreMixin
from .point_reads import run_lease as point_lease


def owner_is_alive(owner: str) -> bool:
    """Whether the process that took a lease still runs (`kill(pid, 0)`); an owner id this
    cannot read, or a process it may not signal, counts as alive."""
    try:
        pid = int(owner.split("-", 1)[0])
    except ValueError:
        return True
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


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


class Lease:
    """A run lease this Store handle holds. Release it with `release()`, or by leaving a
    `with` block (Python's stand-in for upstream's release on drop); an unreleased lease lapses
    after its ttl, or at once when its process is gone."""

    def __init__(self, store: LeasesMixin, run_id: int, generation: int) -> None:
        self._store = store
        self.run_id = run_id
        self.generation = generation
        self.released = False

    def renew(self) -> None:
        """Extend the lease at its generation; `LeaseConflictError` once taken over."""
        self._store.renew_lease(self.run_id, self.generation)

    def release(self) -> None:
        """Give the run up now (no row is left: anyone may acquire it)."""
        self.released = True
        self._store.release_lease(self.run_id, self.generation)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.released:
            self.release()

    def __repr__(self) -> str:
        return (
            f"Lease(run_id={self.run_id}, generation={self.generation}, "
            f"owner={self._store.owner()!r}, released={self.released})"
        )


class LeasesMixin(OlderStoreMixin):
    """`owner`, `acquire_lease`, `renew_lease`, `release_lease`, `run_lease`. The leases this
    handle holds are kept by its checkpoint path (`checkpoints.Checkpoints`), which checks
    them inside each checkpoint of a leased run."""

    @local
    def owner(self) -> str:
        """This handle's opaque lease owner id: two Stores over one database are two owners,
        in one process or not."""
        return self._checkpoints.owner

    @writes
    def acquire_lease(self, run_id: int, ttl_secs: int) -> Lease:
        """Take the lease on a run: free, already this handle's (generation kept), lapsed, or
        held by a process that is gone (both take-overs: generation + 1). Refused with
        `LeaseConflictError` while another live owner's lease is unlapsed. Decision and write
        are one transaction, the write a compare-and-swap on the row decided on, and
        concurrent acquires of one run take turns on the run's row: exactly one wins. As
        upstream, a run id not (or not yet) in the store can be leased: a harness may hold a
        run before it writes it. (Retention deletes a run and its lease under one lock, so it
        never deletes a leased run; a lease left on a run that is gone is named by `check`.)"""
        run_id = i64(run_id, "run_id")
        ttl = i64(ttl_secs, "ttl_secs")
        r = m.RunLease
        conflict: LeaseConflictError | None = None
        with self._write() as conn:
            # Acquires of one run take turns on the run's row. `FOR NO KEY UPDATE` on
            # PostgreSQL: a checkpoint holding the lease row takes `KEY SHARE` on the run (its
            # step's foreign key), which a plain `FOR UPDATE` here would deadlock against.
            conn.execute(select(m.Run.id).where(m.Run.id == run_id).with_for_update(key_share=True))
            held = read_lease(conn, self._backend, run_id, lock=True)
            if held is not None:
                mine = held.owner == self._checkpoints.owner
                if not mine and not held.expired and owner_is_alive(held.owner):
                    conflict = LeaseConflictError(run_id, held.owner, held.expires_at)
            if conflict is None:
                if held is None:
                    taken = conn.execute(
                        insert(r).values(
                            run_id=run_id, owner=self._checkpoints.owner, generation=1, ttl_secs=ttl
                        )
                    ).rowcount
                else:
                    bump = 0 if held.owner == self._checkpoints.owner else 1
                    now = text(self._backend.now())
                    taken = conn.execute(
                        update(r)
                        .where(
                            r.run_id == run_id,
                            r.owner == held.owner,
                            r.generation == held.generation,
                        )
                        .values(
                            owner=self._checkpoints.owner,
                            generation=r.generation + bump,
                            acquired_at=r.acquired_at if bump == 0 else now,
                            renewed_at=now,
                            ttl_secs=ttl,
                        )
                    ).rowcount
                if taken == 0:
                    conflict = lease_conflict(conn, self._backend, run_id)
                else:
                    generation = int(
                        conn.execute(select(r.generation).where(r.run_id == run_id)).scalar_one()
                    )
        if conflict is not None:
            raise conflict
        self._checkpoints.held(run_id, generation)
        return Lease(self, run_id, generation)

    @writes
    def renew_lease(self, run_id: int, generation: int) -> None:
        """Extend this handle's lease at `generation`; `LeaseConflictError` once the run was
        taken over (renewing is no way back in); `RunNotFoundError` once the run is gone."""
        r = m.RunLease
        run_id = i64(run_id, "run_id")
        with self._write() as conn:
            renewed = conn.execute(
                update(r)
                .where(
                    r.run_id == run_id,
                    r.owner == self._checkpoints.owner,
                    r.generation == generation,
                )
                .values(renewed_at=text(self._backend.now()))
            ).rowcount
            conflict: StoreError | None = None
            if not renewed:
                exists = conn.execute(select(m.Run.id).where(m.Run.id == run_id)).first()
                conflict = (
                    lease_conflict(conn, self._backend, run_id)
                    if exists is not None
                    else RunNotFoundError(f"no run with id {run_id} in the store")
                )
        if conflict is not None:
            raise conflict

    @writes
    def release_lease(self, run_id: int, generation: int) -> None:
        """Release this handle's lease at `generation` (the row goes: released is not expired).
        Releasing a lease no longer held is a no-op, not an error."""
        self._checkpoints.released(run_id, generation)
        r = m.RunLease
        with self._write() as conn:
            conn.execute(
                delete(r).where(
                    r.run_id == run_id,
                    r.owner == self._checkpoints.owner,
                    r.generation == generation,
                )
            )

    @reads
    def run_lease(self, run_id: int) -> LeaseRow | None:
        """Who holds a run now and whether that lease lapsed (on the database's clock); None
        when the run has no lease."""
        if self._lacks("run_leases"):
            return None
        rows = self._point("run_lease", point_lease, self._backend.now(), run_id=run_id)
        return None if not rows else lease_row(run_id, rows[0][:5], rows[0][5])
