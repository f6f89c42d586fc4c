"""The connector's one translation of driver errors, where the driver's own error does not say
what happened: a statement psycopg refuses to send (more parameters than PostgreSQL's protocol
carries) leaves as `StatementRefusedError`, never as a lost connection that a caller would
retry for ever, and the connection it was refused on goes on serving; a call on a closed Store
is `StoreClosedError`."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import literal, select
from sqlalchemy.engine import make_url

from harness_store import Store
from harness_store.connector import connector_at
from harness_store.errors import (
    DiskFullError,
    StatementRefusedError,
    StoreClosedError,
    StoreConnectionError,
    UnansweredError,
)

PARAMETERS = 70_000
"""Past the 65,535 parameters a PostgreSQL statement can carry."""


def _too_many() -> Any:
    """A SELECT with one bound parameter for each of `PARAMETERS` values."""
    return select(literal(1)).where(literal(-1).in_(list(range(PARAMETERS))))


@pytest.mark.parametrize("way", ["statement", "driver"])
@pytest.mark.parametrize("unit", ["read", "write"])
def test_a_statement_the_driver_refuses_is_typed_as_refused_not_as_a_lost_connection(
    pg_url: str, way: str, unit: str
) -> None:
    with connector_at(pg_url) as connector:
        opened = connector.read if unit == "read" else connector.write
        with pytest.raises(StatementRefusedError) as refused, opened() as conn:
            if way == "statement":
                conn.execute(_too_many())
            else:  # straight on the driver connection, as the Store's large reads go
                connector.rows(conn, _too_many())
        assert not isinstance(refused.value, StoreConnectionError)
        with connector.read() as conn:
            assert conn.execute(select(literal(2))).scalar() == 2


def test_a_call_on_a_closed_store_is_typed_as_closed(store: Any) -> None:
    kept = store.start_run("kept", "f")
    store.close()
    with pytest.raises(StoreClosedError, match="this Store is closed"):
        store.runs()
    with pytest.raises(StoreClosedError):
        store.finish_run(kept, "done")


def test_a_login_the_server_refused_is_unanswered_and_never_connected(pg_url: str) -> None:
    """psycopg gives a connection refused at its start no SQLSTATE; the translation says so
    by type (`UnansweredError`, `connecting`), so the command and `sync --follow` tell it
    from a lost connection without reading the driver's error themselves."""
    nobody = make_url(pg_url).set(username="hs_test_nobody_at_all")
    with (
        pytest.raises(UnansweredError) as failed,
        connector_at(nobody) as connector,
        connector.read() as conn,
    ):
        conn.execute(select(literal(1)))
    assert failed.value.connecting
    assert "hs_test_nobody_at_all" in str(failed.value)


def test_a_server_out_of_disk_is_disk_full_named_by_the_store(pg_url: str) -> None:
    """PostgreSQL says a full disk with SQLSTATE 53100 (`disk_full`); the server here raises
    that very code from a trigger, as it would when it cannot extend a table's file."""
    with Store.open(pg_url) as store:
        run = store.start_run("goal", "f")
    with connector_at(pg_url) as connector, connector.write() as conn:
        conn.exec_driver_sql(
            "CREATE FUNCTION hs_test_no_room() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = '53100'; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER hs_test_no_room BEFORE INSERT ON memory "
            "FOR EACH ROW EXECUTE FUNCTION hs_test_no_room()"
        )
    with Store.open(pg_url) as store:
        with pytest.raises(DiskFullError, match=r"the disk is full"):
            store.memory_put("/ws", "key", "value", run, 1)
        assert store.memory_list("/ws") == []
        assert store.run_status(run) is not None
