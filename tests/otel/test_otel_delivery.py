"""What `export otlp` says a batch became, against loopback receivers of the tests' own that
answer as real ones sometimes do: only a 2xx answer is delivery (a redirect is not), and
`--timeout` is a wall-clock limit per request even when the reply trickles in a byte at a time,
after which the command says the receiver was reached and which spans may have landed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.clirun import run_in_process

from harness_store import Store

from . import sink as sinks
from .sink import Sink
from .trees import build_tree, write_run

SPANS = 22  # what build_tree's store exports


@pytest.fixture
def tree_store(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        build_tree(store)
    return path


@pytest.fixture
def trickling(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sink]:
    # A reply of about 70 bytes at one a second: over a minute to answer in full.
    monkeypatch.setattr(sinks, "TRICKLE_PAUSE", 1.0)
    sink = Sink.start("trickle")
    yield sink
    sink.stop()


@pytest.mark.parametrize("status", [302, 308])
def test_a_redirect_is_not_delivery(tree_store: Path, status: int) -> None:
    sink = Sink.start(f"redirect-{status}")
    try:
        done = run_in_process("export", "otlp", str(tree_store), "--endpoint", sink.url)
    finally:
        sink.stop()
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(
        f"harness-store: error: the OTLP receiver at {sink.url}/v1/traces answered HTTP {status}"
    ), done.stderr
    assert f"to {sink.url}/elsewhere/v1/traces" in done.stderr
    assert "were not delivered" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert sink.total() == 0


def test_timeout_is_a_wall_clock_limit_against_a_trickled_reply(
    tree_store: Path, trickling: Sink
) -> None:
    started = time.monotonic()
    done = run_in_process(
        "export", "otlp", str(tree_store), "--endpoint", trickling.url, "--timeout", "3"
    )
    if time.monotonic() - started > 50:
        pytest.fail("--timeout 3 did not end the export against a reply trickled over a minute")
    assert done.returncode == 1, done.stdout
    url = f"{trickling.url}/v1/traces"
    assert done.stderr == (
        f"harness-store: error: the OTLP receiver at {url} was reached but did not answer "
        f"within 3 s: batch 1 (spans 1-{SPANS}) was sent and may have landed; no earlier "
        "batch\n"
    )
    assert trickling.total() == SPANS  # it had landed


def test_a_slow_batch_after_delivered_ones_names_both(tmp_path: Path, trickling: Sink) -> None:
    """Which spans arrived and which may have: the receiver answers the first batch (512
    spans) at once and trickles its reply to the second."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("many calls", "/repo")
        write_run(store, run, 300, "m")  # 300 chat and 300 tool spans, and the run's
        store.finish_run(run, "success")
    trickling.behaviour = "ok"
    trickling.slow_after = 1
    done = run_in_process(
        "export", "otlp", str(path), "--endpoint", trickling.url, "--timeout", "3"
    )
    assert done.returncode == 1, done.stdout
    assert done.stderr.endswith(
        "batch 2 (spans 513-601) was sent and may have landed; 512 spans in 1 earlier batch "
        "were delivered\n"
    ), done.stderr
    assert trickling.total() == 601


def test_the_environment_s_http_proxy_is_followed(tree_store: Path) -> None:
    proxy = Sink.start()  # it takes the proxied request as a receiver would
    try:
        done = run_in_process(
            "export", "otlp", str(tree_store), "--endpoint", "http://receiver.invalid:4318",
            env={"http_proxy": proxy.url, "no_proxy": ""},
        )  # fmt: skip
    finally:
        proxy.stop()
    assert done.returncode == 0, done.stderr
    assert proxy.paths == ["http://receiver.invalid:4318/v1/traces"]
    assert proxy.total() == SPANS
