"""Who drives a run: one lease per run, with its owner, generation and time to live
(io-harness 0.62)."""

from __future__ import annotations

from sqlalchemy.orm import Mapped

from .base import Base, rowid_key, stamped


class RunLease(Base):
    """The lease on a run: the owner driving it, a generation bumped on every take-over, when
    it was acquired and last renewed, and how long it lives unrenewed (0.62)."""

    __tablename__ = "run_leases"

    run_id: Mapped[int] = rowid_key(autoincrement=False)
    owner: Mapped[str]
    generation: Mapped[int]
    acquired_at: Mapped[str] = stamped()
    renewed_at: Mapped[str] = stamped()
    ttl_secs: Mapped[int]
