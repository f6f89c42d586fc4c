"""Who drives a run (io-harness 0.62): one lease per run, with an owner, a generation raised on
every take-over, and a time to live. A Store handle is one owner; a handle holding a run's
lease checkpoints that run only while it still holds it, checked inside the checkpoint's own
transaction so a driver taken over mid-step writes nothing."""

from __future__ import annotations

import os
from typing import Self

from sqlalchemy import delete, insert, select, text, update

from .. import models as m
from ..errors import LeaseConflictError, RunNotFoundError, StoreError
from ..records import LeaseRow
from .checkpoints import new_owner_id as new_owner_id
from .lease_rows import check_take_over, lease_conflict, lease_row, lease_ttl, read_lease
from .marks import local, reads, writes
from .release_tables import OlderStoreMixin
from .step_reads import run_lease as point_lease


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
        concurrent acquires of one run take turns on the run's row: exactly one wins.
        `ttl_secs` is from 0 to what makes the lease lapse before the year 9999 (its expiry is
        a stamp io-harness's SQL writes); any other is refused with `InvalidValueError`. As
        upstream, a run id not (or not yet) in the store can be leased: a harness may hold a
        run before it writes it. (Retention deletes a run and its lease under one lock, so it
        never deletes a leased run; a lease left on a run that is gone is named by `check`.)"""
        ttl = lease_ttl(ttl_secs)
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
                    if bump:
                        check_take_over(held)
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
