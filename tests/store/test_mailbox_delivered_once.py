"""A message is delivered once: of two readers of one mailbox at once, one takes it.

PostgreSQL's race (SQLite's writers take turns): the second reader's take waits on the rows
the first one's open transaction marked, and once that commits it finds them read."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import create_engine, text

from harness_store import Store

WAITING = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE agent_messages%'"
)
"""The statements waiting on a lock to mark messages read."""


def wait_for_a_blocked_take(url: str, deadline: float = 60.0) -> None:
    """Return once a reader's UPDATE of the mailbox waits on a lock (polled until `deadline`
    seconds, far past any load: the event, not a sleep, is the condition)."""
    engine = create_engine(url)
    try:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            with engine.connect() as conn:  # a fresh snapshot of pg_stat_activity each poll
                if conn.execute(WAITING).scalar_one():
                    return
            time.sleep(0.02)
        raise AssertionError("the second reader never waited on the first one's rows")
    finally:
        engine.dispose()


def test_two_readers_of_one_mailbox_never_take_the_same_message(pg_url: str) -> None:
    with Store.open(pg_url) as first, Store.open(pg_url) as second:
        to = first.start_run("child", "f")
        peer = first.start_run("peer", "g")
        sent = [first.send_message(peer, to, "peer", n, f"m{n}") for n in range(3)]
        taken: dict[str, Any] = {}

        def take() -> None:
            taken["second"] = second.read_messages(to)

        reader = threading.Thread(target=take)
        with first.transaction():
            taken["first"] = first.read_messages(to)
            reader.start()
            wait_for_a_blocked_take(pg_url)
        reader.join(timeout=60)
        assert not reader.is_alive()
        assert [message.id for message in taken["first"]] == sent
        assert taken["second"] == [], "what the first reader took is not delivered again"
        assert second.read_messages(to) == []
