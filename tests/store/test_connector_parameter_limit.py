"""No statement the package sends carries more parameters than PostgreSQL's driver sends
(65,535): writes over more rows are set-based or chunked, and a read whose `IN` list would
pass the limit is refused, typed and naming its table, before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, text
from support.rows import execute, provider_call

from harness_store import Store, StoreError
from harness_store import models as m
from harness_store.errors import StatementRefusedError
from harness_store.records import PriceTable
from harness_store.store.price_sql import priced_rows, priced_statement

PAST_THE_LIMIT = 65_536 + 100
"""Rows enough that one parameter each passes PostgreSQL's driver limit (65,535); SQLite's
own (32,766 since 3.32) is passed too."""

SERIES = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {count}) "
    "SELECT {columns} FROM n"
)
"""`count` rows numbered from 1, built by the database in one statement (both backends)."""


def rows_of(count: int, columns: str) -> str:
    return SERIES.format(count=count, columns=columns)


@pytest.fixture
def opened(store_target: str, new_store: Any) -> Any:
    new_store.place(store_target)
    with Store.open(store_target) as store:
        yield store


def test_reading_more_unread_messages_than_a_statement_carries_marks_every_one(
    opened: Store,
) -> None:
    store = opened
    to = store.start_run("child", "f")
    peer = store.start_run("peer", "g")
    execute(
        store,
        text(
            "INSERT INTO agent_messages (from_run_id, to_run_id, from_name, step, body, sent_at) "
            + rows_of(PAST_THE_LIMIT, f"{peer}, {to}, 'peer', i, 'm', '2026-01-01T00:00:00Z'")
        ),
    )
    mine = store.send_message(peer, to, "peer", 1, "last")
    store.send_message(to, peer, "child", 1, "not for it")
    taken = store.read_messages(to)
    assert len(taken) == PAST_THE_LIMIT + 1
    assert [message.id for message in taken] == sorted(message.id for message in taken)
    assert taken[-1].id == mine and taken[-1].body == "last"
    stamps = {message.read_at for message in taken}
    assert len(stamps) == 1 and None not in stamps, "every message read at one stamp"
    assert store.read_messages(to) == [], "each message is delivered once"
    assert all(message.read_at is not None for message in store.messages_for(to))
    assert [m.read_at for m in store.messages_for(peer)] == [None], "another run's stays unread"


def test_pricing_more_runs_than_a_statement_carries(opened: Store) -> None:
    store = opened
    runs = [store.start_run("priced", "f") for _ in range(2)]
    for run in runs:
        provider_call(store, run, 10)
    provider_call(store, runs[1], 20)
    ids = [runs[0], *range(10**9, 10**9 + PAST_THE_LIMIT), runs[1]]
    prices = PriceTable.new("2026-01-01")
    statement = priced_statement(prices, "run", "runs")
    every_call = priced_statement(prices, "run", "all")
    with store.engine.connect() as conn:
        priced = list(priced_rows(conn, statement, {"ids": ids}, 1))
        whole = list(priced_rows(conn, every_call, {"ids": ids}, 1))  # ids unused: one pass
    assert sorted(priced) == sorted(whole), "each run once, none other"
    assert [(group, values[0]) for group, values in sorted(priced)] == [
        ((runs[0],), 1),
        ((runs[1],), 2),
    ], "and its calls"


def test_a_read_over_the_driver_limit_is_refused_before_it_is_sent(pg_url: str) -> None:
    """The package's reads take many ids as one parameter (`Store.arrow`'s runs,
    tests/store/test_arrow_many_runs.py); a statement built with a plain `IN` list past the
    limit is refused by the connector, typed and naming its table."""
    with Store.open(pg_url) as store:
        run = store.start_run("goal", "f")
        too_many = [run, *range(10**9, 10**9 + PAST_THE_LIMIT)]
        connector = store._connector
        statement = select(m.Step.id).where(m.Step.run_id.in_(too_many))
        with (
            pytest.raises(StatementRefusedError, match="steps") as refused,
            connector.read() as conn,
        ):
            connector.rows(conn, statement)
        assert "65,535" in str(refused.value)
        assert store.status(run) == "running", "the Store goes on"
        assert store.arrow("steps", runs=too_many).num_rows == 0
    assert issubclass(StatementRefusedError, StoreError)
