"""Whether a PostgreSQL driver connection can be reused: the kept connections' check before
each call (`connection_alive`), the asyncio pool's at each checkout (`check_on_checkout`), and
a connection's own state after a failed statement (psycopg's view: closed, broken, idle, its
transaction aborted). `PostgreSQLBackend` answers the interface's questions with these."""

from __future__ import annotations

import select
import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

PING_AFTER = 1.0
"""Seconds a kept connection may sit idle and still be reused without a ping (see
`connection_alive`): a session ended while it sat idle is seen locally (its
socket is readable) once its backend has gone; the ping covers one told to end a moment
before and not yet gone, which matters only for a connection that sat idle long enough to be
reaped (and for one whose last call failed, which `HeldConnections` pings whatever its idle
time). A thread calling in a loop, or waiting its turn among others, never pays it."""
EMPTY_QUERY = 0
"""libpq's PGRES_EMPTY_QUERY: the answer to an empty query string (the ping)."""
CONNECTION_OK = 0
"""libpq's CONNECTION_OK."""

ASYNC_PING_AFTER = PING_AFTER
"""Seconds an asyncio pool connection may sit idle and be handed out again without a ping
(see `check_on_checkout`), as for a sync Store's kept connections."""
USED = "hs_used"
"""Pool record `info` key: when the connection was last given back (`time.monotonic()`)."""


def check_on_checkout(engine: Engine) -> None:
    """Check each connection the asyncio pool hands out, as the kept connections of a sync
    Store are checked (`connection_alive`): a closed one, or one whose socket is readable
    (the server ended the session), is replaced; one idle for longer than
    `ASYNC_PING_AFTER` is pinged first (on the event loop, through the adapter)."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def given_back(dbapi_connection: Any, record: Any) -> None:
        record.info[USED] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def handed_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        driver = dbapi_connection.driver_connection
        used = record.info.get(USED)
        try:
            if driver.closed or driver.broken:
                raise DisconnectionError("closed")
            readable, _, _ = select.select([driver.fileno()], [], [], 0)
            if readable:
                raise DisconnectionError("the server ended the session")
            idle = None if used is None else time.monotonic() - used
            if idle is not None and idle > ASYNC_PING_AFTER:
                dialect.do_ping(dbapi_connection)  # raises when there is no answer
        except DisconnectionError:
            raise
        except Exception as exc:
            raise DisconnectionError(str(exc)) from exc


def connection_alive(dbapi_connection: Any, idle: float) -> bool:
    """Whether a kept connection can take the next statement without the risk of it
    being lost with the session.

    A session the server ended (restart, `pg_terminate_backend`, an idle reaper) has sent
    its last message and closed its socket: an idle connection whose socket is readable is
    dead — one `select`, no round trip. But a backend told to end a moment ago may not
    have run yet, and a statement sent to it then fails with the session, where the
    caller can only be told that it may have committed. So a connection that sat idle
    longer than `PING_AFTER` (or whose last call failed) is also pinged (a round trip,
    which the dying backend never answers); one used again within it — a writer in a
    loop — is not: the chance that its session was ended in that sliver is small, and if
    it was, the call fails with a typed `StoreConnectionError`, never silently.
    """
    if dbapi_connection.closed or dbapi_connection.broken:
        return False
    try:
        readable, _, _ = select.select([dbapi_connection.fileno()], [], [], 0)
        if readable:
            return False
        if idle > PING_AFTER:
            # an empty query: one round trip, no statement to parse or plan
            pgconn = dbapi_connection.pgconn
            result = pgconn.exec_(b"")
            return bool(result.status == EMPTY_QUERY and pgconn.status == CONNECTION_OK)
    except Exception:
        return False
    return True


def connection_idle(dbapi_connection: Any) -> bool:
    if dbapi_connection.closed or dbapi_connection.broken:
        return False
    return getattr(dbapi_connection.info.transaction_status, "name", None) == "IDLE"


def connection_intact(dbapi_connection: Any) -> bool:
    """psycopg's own view (an asyncio adapter's too): neither closed nor broken."""
    return not (dbapi_connection.closed or dbapi_connection.broken)


def transaction_aborted(dbapi_connection: Any) -> bool:
    """psycopg's view of the connection: a transaction in error can only roll back."""
    info = getattr(dbapi_connection, "info", None)
    status = getattr(info, "transaction_status", None)
    return getattr(status, "name", None) == "INERROR"
