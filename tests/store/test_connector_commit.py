"""A write whose COMMIT reached the server says so when its connection is lost before the
reply: `StoreConnectionError.may_have_committed` is True whenever the server may have
received COMMIT, so a caller never takes a committed write for one that is safe to retry.

The cut is real: a TCP forwarder on 127.0.0.1 between the Store and PostgreSQL
(`support.pg_proxy`) reads the protocol's messages from the client, forwards the first one
carrying COMMIT once armed, and then closes the client's side, so the server commits and its
reply never arrives."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.pg_proxy import PgProxy

from harness_store import ProviderCall, RunStatus, StepRecord, Store
from harness_store.errors import StoreConnectionError


@pytest.fixture
def proxy(pg_url: str, new_store: Any) -> Iterator[PgProxy]:
    """A new store on PostgreSQL, and a `PgProxy` in front of its server."""
    new_store.place(pg_url)
    forwarder = PgProxy(pg_url)
    try:
        yield forwarder
    finally:
        forwarder.close()


def _eventually(seen: Callable[[], bool]) -> bool:
    """Whether `seen` comes true before a deadline well past any load (the server commits
    what it was sent even as its client is gone)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if seen():
            return True
        time.sleep(0.05)
    return False


CALL = ProviderCall(step=1, attempt=1, provider="anthropic", model="m", latency_ms=5)


def _record_call(store: Any, run: int) -> None:
    store.record_provider_call(run, CALL)


def _finish(store: Any, run: int) -> None:
    store.finish_run(run, "done")


def _record_call_in_a_block(store: Any, run: int) -> None:
    with store.transaction():
        store.record_provider_call(run, CALL)


BATCH = 5_001
"""Steps past one bulk statement's 5,000: two statements, one transaction on a kept
connection, ended by its own COMMIT."""


def _checkpoint_batch(store: Any, run: int) -> None:
    store.checkpoint_steps(run, [StepRecord.new(n, "d", "o") for n in range(1, BATCH + 1)])


WRITES = {
    "record_provider_call": (_record_call, lambda s, run: len(s.provider_calls(run)) == 1),
    "finish_run": (_finish, lambda s, run: s.run_status(run) == RunStatus.COMPLETED),
    "checkpoint_steps": (_checkpoint_batch, lambda s, run: s.last_step(run) == BATCH),
    "a transaction block": (
        _record_call_in_a_block,
        lambda s, run: len(s.provider_calls(run)) == 1,
    ),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_whose_commit_reached_the_server_may_have_committed(
    proxy: PgProxy, pg_url: str, store_api: Any, write: str
) -> None:
    call, committed = WRITES[write]
    with store_api.open(proxy.url) as store:
        run = store.start_run("goal", "out.txt")
        proxy.arm_commit_cut()
        with pytest.raises(StoreConnectionError) as lost:
            call(store, run)
        assert proxy.cut.is_set()
        with Store.open(pg_url) as direct:
            assert _eventually(lambda: committed(direct, run)), "the server committed it"
        assert lost.value.may_have_committed is True
        # the Store goes on, on a new connection
        proxy.arm_commit_cut(False)
        assert store.run_status(run) in (RunStatus.RUNNING, RunStatus.COMPLETED)
