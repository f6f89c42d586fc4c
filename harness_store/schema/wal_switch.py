"""0.12's switch of a SQLite store to WAL, owed by an upgrade that reached 0.12 or later and
made only after its commit (it cannot run in a transaction)."""

from __future__ import annotations

from alembic.runtime.environment import EnvironmentContext
from sqlalchemy import Connection

from ..connector import Lent
from ..dialects import backend_for
from ..releases import REVISIONS
from .upgrade_report import UpgradeReport


def switch_to_wal_after(
    context: EnvironmentContext, lent: Lent, report: UpgradeReport, revision: str | None
) -> None:
    """After an upgrade to 0.12 or later has committed, switch the file to WAL (0.12's rule).

    The switch cannot run inside the upgrade's transaction; running it only after the commit
    means a failed upgrade leaves even the file header as it was. If the switch itself fails
    (a full disk), the store is upgraded but still in its old journal mode — io-harness and
    `Store.open` switch it on their next open — and the report says so. `revision` is the one
    the store is at now.
    """
    opts = context.get_context().opts
    if getattr(opts.get("fn"), "__name__", "") != "upgrade":
        return
    conn = lent.conn
    with lent.reading():
        switch = owes_wal(conn, revision)
    if not switch:
        return
    try:
        backend_for(conn).switch_connection_to_wal(conn)
    except Exception as exc:
        report.say(
            f"the upgrade committed, but switching the store to WAL failed ({exc}); "
            "io-harness or Store.open switches it on the next open"
        )
        return
    report.say("switched the store to WAL (io-harness 0.12)")


def owes_wal(conn: Connection, revision: str | None) -> bool:
    """Whether a store at `revision` is owed 0.12's switch to WAL: it is at 0.12 or later and
    its file is not in WAL yet."""
    past = revision in REVISIONS and REVISIONS.index(revision) >= REVISIONS.index("0.12")
    return past and backend_for(conn).needs_wal_switch(conn)
