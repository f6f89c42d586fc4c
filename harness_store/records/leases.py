"""Records of run leases (io-harness 0.62): who drives a run, at which generation, until when."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LeaseRow:
    """The lease on a run as the store holds it. `expires_at` (`renewed_at + ttl_secs`) and
    `expired` are computed by the database against the clock every acquire uses."""

    run_id: int
    owner: str
    generation: int
    acquired_at: str
    renewed_at: str
    expires_at: str
    ttl_secs: int
    expired: bool
