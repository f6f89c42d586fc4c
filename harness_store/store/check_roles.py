"""`check` of a centre with roles: every table a follower role may write is guarded by
row-level security and the rules' policies (the backend's `unguarded_tables`)."""

from __future__ import annotations

from sqlalchemy import Connection

from ..dialects import Backend
from ..records.health import Finding, FindingKind
from .base import StoreBase


def role_findings(conn: Connection, backend: Backend) -> list[Finding]:
    """A finding for each table a follower may write without row-level security or one of
    its policies (none on SQLite, nor on a centre without roles)."""
    return [
        Finding(
            FindingKind.UNGUARDED_TABLE,
            table,
            f"a follower role may write {table} without row-level security or one of its "
            "policies: its plain SQL could change other origins' rows there",
            "io-harness does not read the roles; a follower's writes to this table are unchecked",
            key="name",
            rows=(table,),
            command="harness-store roles DEST --follower NAME (for any follower: it brings the "
            "rules up to date)",
        )
        for table in backend.unguarded_tables(conn)
    ]


def unprotected_tables(store: StoreBase) -> list[str]:
    """The tables a follower role may write without their guard (see `role_findings`)."""
    with store._read() as conn:
        return store._backend.unguarded_tables(conn)
